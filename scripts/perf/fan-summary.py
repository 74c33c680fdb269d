#!/usr/bin/env python3
# fan-summary.py <tag>...: one line per run of scripts/perf/fan-perfstat.sh output (in the current directory):
# the kit's figures, CPU per delivery and per push, the perf syscall counts and, for svc, what its last
# GET /metrics of that server says (events per write, commits; cumulative over every cell run on that server).
import json,sys,glob,re,os
def metrics(path):
    m={}
    if not os.path.exists(path): return m
    for l in open(path):
        if l.startswith('#'): continue
        k,_,v=l.rpartition(' ')
        try: m[k]=float(v)
        except: pass
    return m
def hq(m,name,lab,q):
    bs=[(float(re.search(r'le="([^"]+)"',k).group(1)),v) for k,v in m.items() if k.startswith(name+'_bucket{') and lab in k]
    bs.sort(); tot=bs[-1][1] if bs else 0
    for le,c in bs:
        if tot and c>=q*tot: return le
def perf(path):
    p={}
    if not os.path.exists(path): return p
    for l in open(path):
        f=l.strip().split(',')
        if len(f)>=3 and f[2].startswith('syscalls'): p[f[2].split('_enter_')[1]]=int(f[0]) if f[0].isdigit() else 0
    return p
for tag in sys.argv[1:]:
    rows=[json.loads(l) for l in open(tag+'.jsonl')]
    reps={'svc':0,'centrifugo':0}
    for r in rows:
        srv='svc' if r['label'].startswith('svc') else 'centrifugo'
        reps[srv]+=1; rep=reps[srv]
        d=r['delivered']; cpu=r['server_cpu_s']
        out=f"{tag} {srv}#{rep} {r['scenario']} acc/s={r['accepted_per_s']:.0f} deliv={d} deliv/s={r['delivered_per_s']:.0f} lost={r['lost']} dup={r['dup']} cpu={cpu} tool={r.get('tool_cpu_s')} cpu/deliv={1e6*cpu/max(d,1):.2f}us cpu/push={1e3*cpu/max(r['accepted'],1):.3f}ms"
        lat=r.get('latency_ms') or {}; comp=r.get('complete_ms') or {}
        if r['scenario']!='throughput':
            out+=f" p50={lat.get('p50')} p99={lat.get('p99')} allsubs_p99={comp.get('p99')} pubrtt_p99={(r.get('pub_rtt_ms') or {}).get('p99')} first_p99={(r.get('first_recv_ms') or {}).get('p99')} allsubs_p50={comp.get('p50')}"
        p=perf(f"{tag}.perf.{srv}.{rep}")
        if p: out+=f" | write={p.get('write')} read={p.get('read')} epoll={p.get('epoll_pwait')} futex={p.get('futex')} fsync={p.get('fsync')} pwrite={p.get('pwrite64')} writes/deliv={p.get('write',0)/max(d,1):.3f}"
        if srv=='svc':
            m=metrics(f"{tag}.metrics.{rep}")
            if m:
                g=lambda k: m.get(k,0)
                MW='{writer="messages"}'; SM='{store="main"}'
                dv=g('svc_deliveries_total{stream="chat"}'); w=g('svc_sse_writes_total{stream="chat"}')
                nc=max(g('svc_commit_seconds_count'+MW),1); ns=max(g('svc_store_commit_seconds_count'+SM),1)
                out+=" | hub_deliv=%d sse_writes=%d ev/write=%.2f commits=%d batch_mean=%.1f commit_mean_ms=%.2f commit_p50<=%s p99<=%s COMMIT_mean_ms=%.2f COMMIT_p99<=%s" % (dv,w,dv/max(w,1),nc,g('svc_commit_batch_size_sum'+MW)/nc,1e3*g('svc_commit_seconds_sum'+MW)/nc,hq(m,'svc_commit_seconds','messages',.5),hq(m,'svc_commit_seconds','messages',.99),1e3*g('svc_store_commit_seconds_sum'+SM)/ns,hq(m,'svc_store_commit_seconds','"main"',.99))
        print(out)
