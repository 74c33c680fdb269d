// Agents at work: per member the activity timeline (exchanges, tool
// actions, markers, prompts; newest first, paged, live over the member's
// activity stream), token and cost usage over time as an SVG chart with a
// table beside it, and the trace of an objective with its GenAI records.
//
// Everything the agents produced (prompts, messages, tool input and
// results, model names) is hostile: it is only ever a Text node, shown
// in <pre> blocks, cut at MAX_TEXT.
import {h, replace} from '../h.js';
import {api} from '../api.js';
import {ResumableStream} from '../sse.js';
import {status, field, table, str, stamp, obj} from '../ui.js';

const PAGE = 50;
const MAX_HELD = 2000; // timeline rows held on screen
const MAX_ROUTE_ROWS = 1000; // the most GET /members/:name/activity answers
const MAX_TEXT = 64 << 10; // what of one text value is shown
const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const SVGNS = 'http://www.w3.org/2000/svg';

// RANGES are the usage chart's spans: bucket count and size.
const RANGES = {
  '24h': {label: 'Last 24 hours', n: 24, ms: 3600e3, fmt: (d) => d.toLocaleTimeString([], {hour: '2-digit', minute: '2-digit'})},
  '7d': {label: 'Last 7 days', n: 7, ms: 86400e3, fmt: (d) => d.toLocaleDateString([], {weekday: 'short', day: 'numeric'})},
  '30d': {label: 'Last 30 days', n: 30, ms: 86400e3, fmt: (d) => d.toLocaleDateString([], {month: 'short', day: 'numeric'})},
};

// s builds an SVG element (h() makes HTML ones). Attributes only, never
// a style; text children are Text nodes.
function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== null && v !== undefined) el.setAttribute(k, String(v));
  for (const c of children) if (c !== null && c !== undefined) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

function num(v) { const n = Number(v); return Number.isFinite(n) ? n : 0; }
function fmtInt(v) { return Math.round(num(v)).toLocaleString(); }
function exchanges(v) { return `${fmtInt(v)} exchange${Math.round(num(v)) === 1 ? '' : 's'}`; }
function fmtCost(v) { const n = num(v); return '$' + (n && n < 0.01 ? n.toFixed(4) : n.toFixed(2)); }
// fmtCostFine shows a step's cost to a hundredth of a cent under a dollar:
// one exchange costs cents, and $0.01 for $0.0149 hides the differences.
function fmtCostFine(v) { const n = num(v); return '$' + (n && n < 1 ? n.toFixed(4) : n.toFixed(2)); }

// text renders any value as bounded text: strings as they are, the rest
// as indented JSON.
function asText(v) {
  let t;
  if (typeof v === 'string') t = v;
  else { try { t = JSON.stringify(v, null, 2); } catch { t = String(v); } }
  if (t === undefined) t = '';
  return t.length > MAX_TEXT ? t.slice(0, MAX_TEXT) + '\n… (cut)' : t;
}

function pre(v, cls) { return h('pre', {class: ['payload', cls], tabindex: '0'}, asText(v)); }

// contentText flattens a provider message content (a string, or Anthropic
// blocks) into readable text.
function contentText(c) {
  if (typeof c === 'string') return c;
  if (!Array.isArray(c)) return asText(c);
  return c.slice(0, 500).map((b) => {
    const o = obj(b);
    if (o.type === 'text' && typeof o.text === 'string') return o.text;
    if (o.type === 'tool_use') return `[tool call ${str(o.name)}] ${asText(o.input)}`;
    if (o.type === 'tool_result') return `[tool result ${str(o.tool_use_id)}] ${contentText(o.content)}`;
    return asText(o);
  }).join('\n\n');
}

function messagesBlock(label, msgs) {
  if (!Array.isArray(msgs) || !msgs.length) return null;
  return h('div', {class: 'conv-block'}, h('h4', {}, label),
    msgs.slice(0, 500).map((m) => {
      const o = obj(m);
      return h('div', {class: 'turn'}, h('span', {class: 'role'}, str(o.role) || '?'), pre(contentText(o.content)));
    }));
}

function usageText(u) {
  const o = obj(u);
  const parts = [`${fmtInt(o.inputTokens)} in`, `${fmtInt(o.outputTokens)} out`];
  if (num(o.cacheReadTokens)) parts.push(`${fmtInt(o.cacheReadTokens)} cache read`);
  if (num(o.cacheCreationTokens)) parts.push(`${fmtInt(o.cacheCreationTokens)} cache write`);
  if (num(o.reasoningTokens)) parts.push(`${fmtInt(o.reasoningTokens)} reasoning`);
  return parts.join(' · ');
}

const KIND_LABEL = {
  llm_exchange: 'Exchange', tool_action: 'Tool', objective_open: 'Took objective', objective_close: 'Released objective',
  user_prompt: 'Prompt', opaque_http: 'Telemetry',
};

// rowNode renders one activity row. onObjective(id) opens a trace.
export function rowNode(row, onObjective) {
  const r = obj(row);
  const d = obj(r.data);
  const kind = Object.hasOwn(KIND_LABEL, r.kind) ? r.kind : 'other';
  const head = [h('span', {class: 'kind'}, KIND_LABEL[kind] || str(r.kind) || '?'), stamp(r.ts),
    r.memberDeleted ? h('span', {class: 'tag deleted', title: 'This row belongs to a member who was deleted; the name may now belong to someone else.'}, 'deleted member') : null];
  const body = [];
  const more = [];
  switch (kind) {
    case 'llm_exchange': {
      head.push(h('span', {class: 'model'}, str(d.model) || 'unknown model'));
      body.push(h('p', {class: 'facts'},
        usageText(d.usage),
        d.costUsd !== undefined ? ' · ' + fmtCost(d.costUsd) : '',
        d.stopReason ? ' · stop: ' + str(d.stopReason) : '',
        d.durationMs !== undefined ? ` · ${fmtInt(d.durationMs)} ms` : '',
        d.truncated ? ' · request truncated' : '', d.requestOnly ? ' · request only' : ''));
      if (Array.isArray(d.system) || typeof d.system === 'string') more.push(h('div', {class: 'conv-block'}, h('h4', {}, 'System'), pre(contentText(d.system))));
      more.push(messagesBlock('Messages', d.messages));
      if (d.content !== undefined) more.push(h('div', {class: 'conv-block'}, h('h4', {}, 'Response'), pre(contentText(d.content))));
      if (Array.isArray(d.tools) && d.tools.length) more.push(h('p', {class: 'facts'}, 'Tools offered: ' + d.tools.slice(0, 200).map(str).join(', ')));
      break;
    }
    case 'tool_action':
      head.push(h('span', {class: 'model'}, str(d.tool) || '?'));
      body.push(h('p', {class: 'facts'}, [d.phase && str(d.phase), d.decision && 'decision: ' + str(d.decision),
        d.success !== undefined && (d.success ? 'succeeded' : 'failed'), d.durationMs !== undefined && `${fmtInt(d.durationMs)} ms`,
        d.source && 'from ' + str(d.source)].filter(Boolean).join(' · ')));
      if (d.error) body.push(h('p', {class: 'facts error'}, 'Error: ', asText(d.error)));
      if (d.input !== undefined) more.push(h('div', {class: 'conv-block'}, h('h4', {}, 'Input'), pre(d.input)));
      if (d.result !== undefined) more.push(h('div', {class: 'conv-block'}, h('h4', {}, 'Result'), pre(d.result)));
      break;
    case 'objective_open':
    case 'objective_close': {
      const id = str(d.objectiveId) || str(r.objectiveId);
      body.push(h('p', {class: 'facts'}, str(d.title) || id, kind === 'objective_close' && d.reason ? ` (${str(d.reason)})` : '',
        id && onObjective ? [' · ', h('button', {type: 'button', class: 'link', onclick: () => onObjective(id)}, 'Show trace')] : null));
      break;
    }
    case 'user_prompt':
      if (typeof d.prompt === 'string') body.push(pre(d.prompt));
      else body.push(h('p', {class: 'facts'}, d.promptLength !== undefined ? `A prompt of ${fmtInt(d.promptLength)} characters (its text was not exported).` : 'A prompt (its text was not exported).'));
      break;
    default:
      head.push(h('span', {class: 'model'}, str(d.event)));
      more.push(pre(kind === 'opaque_http' ? d.attributes : d));
  }
  const extra = more.filter(Boolean);
  return h('li', {class: ['act', 'kind-' + kind], 'data-id': String(r.id)},
    h('div', {class: 'act-head'}, head),
    body,
    extra.length ? h('details', {}, h('summary', {}, kind === 'llm_exchange' ? 'Messages and response' : 'Details'), extra) : null);
}

// inferenceNode renders a GenAI inference record.
function inferenceNode(rec) {
  const r = obj(rec);
  const parts = (msgs) => (Array.isArray(msgs) ? msgs : []).slice(0, 500).map((m) => {
    const o = obj(m);
    return h('div', {class: 'turn'}, h('span', {class: 'role'}, str(o.role) || 'system', o.finishReason ? ` (${str(o.finishReason)})` : ''),
      (Array.isArray(o.parts) ? o.parts : [o]).slice(0, 500).map((p) => {
        const q = obj(p);
        if (q.type === 'text') return pre(q.content);
        if (q.type === 'tool_call') return pre(`[tool call ${str(q.name)} ${str(q.id)}] ${asText(q.arguments)}`);
        if (q.type === 'tool_call_response') return pre(`[tool result ${str(q.id)}] ${asText(q.response)}`);
        return pre(q);
      }));
  });
  return h('div', {class: 'inference'},
    h('p', {class: 'facts'}, h('strong', {}, 'GenAI record '), [str(r.provider), str(r.api), str(r.model)].filter(Boolean).join(' · '),
      r.responseId ? ' · ' + str(r.responseId) : '', ' · ', usageText(r.usage)),
    h('details', {}, h('summary', {}, 'Full context'),
      h('div', {class: 'conv-block'}, h('h4', {}, 'System instructions'), parts(r.systemInstructions)),
      h('div', {class: 'conv-block'}, h('h4', {}, 'Input'), parts(r.inputMessages)),
      h('div', {class: 'conv-block'}, h('h4', {}, 'Output'), parts(r.outputMessages)),
      Array.isArray(r.toolDefinitions) && r.toolDefinitions.length ? toolsBlock(r.toolDefinitions) : null));
}

// toolsBlock lists the tools a request offered (each as the provider
// takes it: Anthropic {name, description, input_schema}, OpenAI
// {type, function | name, …}, a Codex namespace holding tools), each
// with its whole definition on demand.
function toolsBlock(tools) {
  const nameOf = (t) => {
    const q = obj(t);
    return str(q.name) || str(obj(q.function).name) || str(q.type) || '?';
  };
  const item = (t) => {
    const q = obj(t);
    const desc = str(q.description) || str(obj(q.function).description);
    const inner = Array.isArray(q.tools) ? ` (${q.tools.slice(0, 500).map(nameOf).join(', ')})` : '';
    return h('details', {class: 'tool-def'}, h('summary', {}, nameOf(t), inner, desc ? ' — ' + desc.slice(0, 200) : ''), pre(t));
  };
  return h('div', {class: 'conv-block'}, h('h4', {}, `Tools offered (${tools.length})`), tools.slice(0, 500).map(item));
}

// --- the trace as a conversation
//
// Each exchange of a trace carries the whole request (system, every
// message so far) and the response; shown one after another they repeat
// the conversation at every step. So the trace shows per member only what
// each step adds: the messages not already shown (the part after the
// longest common prefix with the previous request plus its response), then
// the response. Turns are normalized from the three shapes telemetry
// carries: Anthropic Messages, OpenAI chat, and GenAI parts.

// turnsOfMessages normalizes provider messages to [{role, parts}], parts
// being {type: 'text', text} | {type: 'call', id, name, input} |
// {type: 'result', id, content, error}.
function turnsOfMessages(msgs) {
  return (Array.isArray(msgs) ? msgs : []).slice(0, 2000).map((m) => {
    const o = obj(m);
    let role = str(o.role) || 'user';
    const parts = [];
    if (Array.isArray(o.parts)) {
      // GenAI: parts text / tool_call / tool_call_response.
      for (const p of o.parts.slice(0, 500)) {
        const q = obj(p);
        if (q.type === 'text') parts.push({type: 'text', text: asText(q.content)});
        else if (q.type === 'tool_call') parts.push({type: 'call', id: str(q.id), name: str(q.name), input: q.arguments});
        else if (q.type === 'tool_call_response') parts.push({type: 'result', id: str(q.id), content: q.response});
        else parts.push({type: 'text', text: asText(q)});
      }
    } else if (typeof o.content === 'string') {
      if (role === 'tool') parts.push({type: 'result', id: str(o.tool_call_id), content: o.content});
      else parts.push({type: 'text', text: o.content});
    } else if (Array.isArray(o.content)) {
      for (const b of o.content.slice(0, 500)) {
        const q = obj(b);
        if (q.type === 'text' || q.type === 'input_text' || q.type === 'output_text') parts.push({type: 'text', text: asText(q.text)});
        else if (q.type === 'tool_use') parts.push({type: 'call', id: str(q.id), name: str(q.name), input: q.input});
        else if (q.type === 'tool_result') parts.push({type: 'result', id: str(q.tool_use_id), content: Array.isArray(q.content) ? contentText(q.content) : q.content, error: !!q.is_error});
        else parts.push({type: 'text', text: asText(q)});
      }
    } else if (o.content !== undefined && o.content !== null) {
      parts.push({type: 'text', text: asText(o.content)});
    }
    // OpenAI chat: the assistant's calls beside its text.
    for (const c of (Array.isArray(o.tool_calls) ? o.tool_calls : []).slice(0, 500)) {
      const q = obj(c);
      parts.push({type: 'call', id: str(q.id), name: str(obj(q.function).name), input: obj(q.function).arguments});
    }
    // A user message of tool results only is the tools speaking.
    if (parts.length && parts.every((p) => p.type === 'result')) role = 'tool';
    return {role, parts};
  });
}

const ROLE_LABEL = {system: 'System', user: 'User', assistant: 'Assistant', tool: 'Tool', developer: 'Developer'};

// turnNode renders one turn; calls and results are folded, named by the
// tool (names: call id → tool name, across the trace).
function turnNode(turn, names) {
  const role = Object.hasOwn(ROLE_LABEL, turn.role) ? turn.role : 'other';
  return h('li', {class: ['turn', 'role-' + role]},
    h('span', {class: 'role'}, ROLE_LABEL[role] || turn.role),
    turn.parts.map((p) => {
      if (p.type === 'text') return h('div', {class: 'turn-text'}, p.text.length > MAX_TEXT ? p.text.slice(0, MAX_TEXT) + '\n… (cut)' : p.text);
      if (p.type === 'call') {
        if (p.id) names.set(p.id, p.name);
        return h('details', {class: 'tool-call'}, h('summary', {}, 'Tool call: ', h('code', {}, p.name || '?')), pre(p.input));
      }
      const name = names.get(p.id);
      return h('details', {class: ['tool-result', p.error ? 'error' : null]},
        h('summary', {}, p.error ? 'Tool error' : 'Tool result', name ? [': ', h('code', {}, name)] : ''), pre(p.content));
    }));
}

function sameTurn(a, b) { return JSON.stringify(a) === JSON.stringify(b); }

// stepCost says what a step cost: the agent's figure, the broker's
// (computed), or that its model has no price.
function stepCost(costUsd, computed, hasTokens) {
  if (typeof costUsd === 'number' && Number.isFinite(costUsd)) return h('span', {class: 'cost'}, fmtCostFine(costUsd), computed ? ' (computed)' : '');
  return hasTokens ? h('span', {class: 'cost unpriced', title: 'The price table has no price for this model: its cost is in no sum.'}, 'unpriced') : null;
}

function hasTokens(u) { const o = obj(u); return num(o.inputTokens) + num(o.outputTokens) + num(o.cacheReadTokens) + num(o.cacheCreationTokens) > 0; }

function whoNode(name, deleted) {
  return h('span', {class: 'who'}, name || '?', deleted ? h('span', {class: 'tag deleted', title: 'This member was deleted; the name may now belong to someone else.'}, 'deleted member') : null);
}

// traceConversation renders trace rows as a conversation: one step per
// row, its new turns, tokens and cost.
export function traceConversation(rows) {
  const names = new Map(); // tool call id → tool name
  const seen = new Map(); // member → {turns (shown so far), system}
  let n = 0;
  return h('ol', {class: 'conversation trace-rows', 'aria-label': 'The objective\'s work, step by step'}, rows.map((row) => {
    const r = obj(row);
    const act = r.activity ? obj(r.activity) : null;
    const inf = r.inference ? obj(r.inference) : null;
    const d = obj(act && act.data);
    const kind = act ? (Object.hasOwn(KIND_LABEL, act.kind) ? act.kind : 'other') : 'genai';
    const deleted = !!(r.memberDeleted || (act && act.memberDeleted) || (inf && inf.memberDeleted));
    const who = whoNode(str(r.member), deleted);
    const ts = num(r.ts) || num(act && act.ts) || num(inf && inf.ts);
    if (kind === 'objective_open' || kind === 'objective_close') {
      return h('li', {class: ['step', 'marker', 'kind-' + kind]}, h('div', {class: 'step-head'}, who,
        kind === 'objective_open' ? ' took the objective' : ` released it${d.reason ? ' (' + str(d.reason) + ')' : ''}`, stamp(ts)));
    }
    if (kind === 'tool_action') {
      const facts = [d.phase && str(d.phase), d.decision && 'decision: ' + str(d.decision), d.success !== undefined && (d.success ? 'succeeded' : 'failed'),
        d.durationMs !== undefined && `${fmtInt(d.durationMs)} ms`].filter(Boolean).join(' · ');
      if (d.callId && d.tool) names.set(str(d.callId), str(d.tool));
      return h('li', {class: ['step', 'tool-step', 'kind-tool_action']},
        h('div', {class: 'step-head'}, who, h('span', {class: 'kind'}, 'Tool'), h('code', {class: 'model'}, str(d.tool) || '?'), stamp(ts)),
        facts ? h('p', {class: 'step-usage'}, facts) : null,
        d.error ? h('p', {class: 'step-usage error'}, 'Error: ', asText(d.error)) : null,
        d.input !== undefined ? h('details', {class: 'tool-call'}, h('summary', {}, 'Input'), pre(d.input)) : null,
        d.result !== undefined ? h('details', {class: 'tool-result'}, h('summary', {}, 'Result'), pre(d.result)) : null);
    }
    if (kind === 'user_prompt') {
      return h('li', {class: ['step', 'kind-user_prompt']}, h('div', {class: 'step-head'}, who, h('span', {class: 'kind'}, 'Prompt'), stamp(ts)),
        h('ol', {class: 'turns'}, turnNode({role: 'user', parts: [{type: 'text', text: typeof d.prompt === 'string' ? d.prompt : '(the prompt\'s text was not exported)'}]}, names)));
    }
    if (kind !== 'llm_exchange' && kind !== 'genai') {
      return h('li', {class: ['step', 'kind-' + kind]}, h('div', {class: 'step-head'}, who, h('span', {class: 'kind'}, KIND_LABEL[kind] || 'Other'), stamp(ts)),
        h('details', {}, h('summary', {}, 'Details'), pre(kind === 'opaque_http' ? d.attributes : d)));
    }
    // An exchange (with its GenAI record when joined) or a record alone.
    n += 1;
    const useInf = inf && (Array.isArray(inf.inputMessages) || Array.isArray(inf.outputMessages));
    const system = useInf && Array.isArray(inf.systemInstructions) && inf.systemInstructions.length
      ? turnsOfMessages([{role: 'system', parts: inf.systemInstructions}])[0]
      : (d.system !== undefined && d.system !== null && contentText(d.system).trim() ? {role: 'system', parts: [{type: 'text', text: contentText(d.system)}]} : null);
    const input = useInf ? turnsOfMessages(inf.inputMessages) : turnsOfMessages(d.messages);
    let output = useInf ? turnsOfMessages(inf.outputMessages) : (d.content !== undefined ? turnsOfMessages([{role: 'assistant', content: d.content}]) : []);
    output = output.map((t) => ({...t, role: t.role === 'user' ? 'assistant' : t.role}));
    const key = str(r.member) + (deleted ? '\u0000' + str(r.memberId) : '');
    const prev = seen.get(key) || {turns: [], system: null};
    let k = 0;
    while (k < input.length && k < prev.turns.length && sameTurn(input[k], prev.turns[k])) k += 1;
    const fresh = input.slice(k);
    const shown = [];
    if (system && (!prev.system || !sameTurn(system, prev.system))) shown.push(system);
    shown.push(...fresh, ...output);
    seen.set(key, {turns: [...input, ...output], system: system || prev.system});
    const model = str(d.model) || str(inf && inf.model);
    const usage = act ? d.usage : inf && inf.usage;
    const cost = act ? stepCost(typeof d.costUsd === 'number' ? d.costUsd : undefined, !!d.costComputed, hasTokens(usage))
      : stepCost(typeof inf.costUsd === 'number' ? inf.costUsd : undefined, !!inf.costComputed, hasTokens(usage));
    const rebuilt = prev.turns.length && k === 0 && input.length ? h('p', {class: 'hint'}, 'A new context: nothing of the previous request was carried over.') : null;
    return h('li', {class: ['step', 'exchange', act ? 'kind-llm_exchange' : 'kind-genai']},
      h('div', {class: 'step-head'}, h('span', {class: 'step-n'}, `Step ${n}`), who, h('code', {class: 'model'}, model || 'unknown model'), stamp(ts)),
      h('p', {class: 'step-usage'}, usageText(usage), cost ? [' · ', cost] : '',
        act && d.durationMs !== undefined ? ` · ${fmtInt(d.durationMs)} ms` : '', act && d.stopReason ? ' · stop: ' + str(d.stopReason) : '',
        act && d.truncated ? ' · request truncated' : ''),
      k && fresh.length < input.length ? h('p', {class: 'hint carried'}, `${k} earlier message${k === 1 ? '' : 's'} carried over, not repeated.`) : null,
      rebuilt,
      shown.length ? h('ol', {class: 'turns'}, shown.map((t) => turnNode(t, names))) : h('p', {class: 'empty'}, 'No message was recorded for this step (tokens and cost only).'),
      inf ? inferenceNode(inf) : null,
      act && !useInf && (d.messages || d.system) ? h('details', {class: 'full-request'}, h('summary', {}, 'The whole request'),
        d.system !== undefined ? h('div', {class: 'conv-block'}, h('h4', {}, 'System'), pre(contentText(d.system))) : null,
        messagesBlock('Messages', d.messages)) : null);
  }));
}

// usageSummary renders an objective's usage: totals, each model (with
// what it is priced as, or that it has no price) and each member.
function usageSummary(us) {
  const u = obj(us && us.usage);
  const models = (Array.isArray(us && us.models) ? us.models : []).map(obj);
  const members = (Array.isArray(us && us.members) ? us.members : []).map(obj);
  const unpriced = num(u.unpricedExchanges);
  return h('div', {class: 'trace-usage'},
    h('p', {class: 'facts trace-total'}, `Usage: ${exchanges(u.exchanges)}, ${usageText(u)}, ${fmtCostFine(u.costUsd)}`,
      num(u.costComputedUsd) ? ` (${fmtCostFine(u.costComputedUsd)} of it computed from the price table)` : ''),
    unpriced ? h('p', {class: 'notice unpriced-count'}, `${fmtInt(unpriced)} ${unpriced === 1 ? 'call has' : 'calls have'} no price (the price table does not know the model): ${unpriced === 1 ? 'its' : 'their'} cost is in no sum above.`) : null,
    models.length ? table([
      {label: 'Model', cell: (m) => h('span', {}, h('code', {}, str(m.model) || '?'), m.pricedAs && m.pricedAs !== m.model ? [' as ', h('code', {}, str(m.pricedAs))] : '')},
      {label: 'Calls', cell: (m) => fmtInt(m.exchanges)},
      {label: 'Tokens', cell: (m) => usageText(m)},
      {label: 'Cost', cell: (m) => (typeof m.costUsd === 'number' ? fmtCostFine(m.costUsd) : num(m.unpricedExchanges) ? `unpriced (${fmtInt(m.unpricedExchanges)} of ${fmtInt(m.exchanges)})` : '—')},
    ], models, {caption: 'Cost per model'}) : null,
    members.length > 1 || members.some((m) => m.memberDeleted) ? table([
      {label: 'Member', cell: (m) => whoNode(str(m.member), !!m.memberDeleted)},
      {label: 'Calls', cell: (m) => fmtInt(obj(m.usage).exchanges)},
      {label: 'Tokens', cell: (m) => usageText(m.usage)},
      {label: 'Cost', cell: (m) => fmtCostFine(obj(m.usage).costUsd) + (num(obj(m.usage).unpricedExchanges) ? ` + ${fmtInt(obj(m.usage).unpricedExchanges)} unpriced` : '')},
    ], members, {caption: 'Cost per member'}) : null);
}

// usageChart draws buckets [{label, usage}] as bars of metric, in an SVG
// made with DOM calls, labelled for assistive technology by its caption.
function usageChart(buckets, metric, captionId, width) {
  // Drawn at the box's own width, so one unit is one pixel and the labels
  // keep their size on a phone.
  const W = Math.max(280, Math.min(2000, Math.round(width) || 720)), H = 220, top = 10, bottom = 36, left = 56, right = 8;
  const val = (u) => (metric === 'cost' ? num(u.costUsd) : num(u.inputTokens) + num(u.outputTokens) + num(u.cacheReadTokens) + num(u.cacheCreationTokens));
  const max = Math.max(0, ...buckets.map((b) => val(b.usage)));
  const scale = max > 0 ? max : 1;
  const bw = (W - left - right) / Math.max(1, buckets.length);
  const fmt = (v) => (metric === 'cost' ? fmtCost(v) : fmtInt(v));
  const svg = s('svg', {viewBox: `0 0 ${W} ${H}`, width: W, height: H, class: 'chart', role: 'img', 'aria-labelledby': captionId});
  svg.append(s('line', {x1: left, y1: H - bottom, x2: W - right, y2: H - bottom, class: 'axis'}));
  svg.append(s('text', {x: left - 6, y: top + 10, class: 'tick', 'text-anchor': 'end'}, fmt(max)));
  svg.append(s('text', {x: left - 6, y: H - bottom, class: 'tick', 'text-anchor': 'end'}, '0'));
  const every = Math.ceil(buckets.length / Math.max(2, Math.floor((W - left) / 72)));
  buckets.forEach((b, i) => {
    const v = val(b.usage);
    const hgt = v > 0 ? Math.max(2, (v / scale) * (H - top - bottom)) : 0;
    const x = left + i * bw + bw * 0.15;
    svg.append(s('rect', {x: x.toFixed(1), y: (H - bottom - hgt).toFixed(1), width: (bw * 0.7).toFixed(1), height: hgt.toFixed(1),
      class: v > 0 ? 'bar' : 'bar zero', 'data-bucket': i, 'data-value': v},
    s('title', {}, `${b.label}: ${fmt(v)}`)));
    if (i % every === 0) svg.append(s('text', {x: (x + bw * 0.35).toFixed(1), y: H - bottom + 16, class: 'tick', 'text-anchor': 'middle'}, b.label));
  });
  return svg;
}

export const activityPage = {
  title: 'Activity', auth: true,
  render(main, {app, url}) {
    const me = app.session.member;
    const canReadAll = Array.isArray(app.session.permissions) && app.session.permissions.includes('activity.read');
    const asked = url.searchParams.get('member') || me;
    const member = canReadAll && NAME_RE.test(asked) ? asked : me;
    let alive = true;
    let stream = null;

    const go = (params) => {
      const u = new URL(location.href);
      for (const [k, v] of Object.entries(params)) { if (v) u.searchParams.set(k, v); else u.searchParams.delete(k); }
      history.replaceState(null, '', u.pathname + u.search);
    };

    // --- member picker
    const picker = h('select', {id: 'act-member', name: 'member', disabled: !canReadAll}, h('option', {value: member, selected: true}, member));
    picker.addEventListener('change', () => {
      const u = new URL(location.href);
      u.searchParams.set('member', picker.value);
      u.searchParams.delete('objective');
      history.pushState(null, '', u.pathname + u.search);
      dispatchEvent(new PopStateEvent('popstate'));
    });
    const head = h('div', {class: 'act-top'},
      h('h1', {}, 'Activity'),
      field('Member', picker, canReadAll ? null : 'Reading others\' activity needs the activity.read permission; you see your own.'));

    // --- timeline
    const tlStatus = status();
    const liveNote = h('span', {class: 'act-live', role: 'status'}, '');
    const list = h('ol', {class: 'timeline', 'aria-label': 'Activity of ' + member});
    const nodes = new Map(); // id (string) → li
    // pageTs is the oldest ts of the rows read by paging (not live ones: a
    // late row with an old ts must not make "Load older" jump past rows
    // never read). gen counts reloads, so a page answered after the kind
    // changed is dropped instead of mixed in.
    let pageTs = Infinity;
    let gen = 0;
    let exhausted = false;
    const kindSel = h('select', {id: 'act-kind', name: 'kind'},
      h('option', {value: ''}, 'Everything'),
      Object.entries(KIND_LABEL).map(([k, l]) => h('option', {value: k}, l)));
    const older = h('button', {type: 'button', class: 'quiet', hidden: true, onclick: () => loadPage(true)}, 'Load older activity');

    // Rows are kept in the broker's order, newest ts first then highest
    // id, so a page of older rows lands below and a late row in its place.
    const before = (ts, n, el) => {
      const et = Number(el.dataset.ts);
      return et < ts || (et === ts && BigInt(el.dataset.id) < n);
    };
    const insert = (row) => {
      if (!row || row.id === undefined) return;
      const id = String(row.id);
      if (!/^[0-9]{1,19}$/.test(id) || nodes.has(id)) return;
      if (kindSel.value && row.kind !== kindSel.value) return;
      const node = rowNode(row, (oid) => openTrace(oid));
      const n = BigInt(id);
      const ts = Number.isFinite(Number(row.ts)) ? Number(row.ts) : 0;
      node.dataset.ts = String(ts);
      let at = null;
      for (const el of list.children) { if (el.dataset.id && before(ts, n, el)) { at = el; break; } }
      list.insertBefore(node, at);
      nodes.set(id, node);
      while (nodes.size > MAX_HELD) {
        const last = list.lastElementChild;
        if (!last) break;
        nodes.delete(last.dataset.id);
        last.remove();
        // What is below the last row shown is to be read again.
        pageTs = Number(list.lastElementChild?.dataset.ts ?? pageTs);
        exhausted = false;
        older.hidden = false;
      }
      const empty = list.querySelector('.empty');
      if (empty) empty.remove();
    };

    const loadPage = async (olderPage) => {
      const g = gen;
      older.disabled = true;
      tlStatus.busy('Loading…');
      try {
        const q = {limit: PAGE, kind: kindSel.value || undefined};
        if (olderPage && Number.isFinite(pageTs)) {
          // to is inclusive and the route has no id cursor: ask again for
          // the rows at pageTs already held, plus a page, so rows sharing
          // that millisecond are never skipped (up to the route's 1000).
          let held = 0;
          for (const el of list.children) if (Number(el.dataset.ts) === pageTs) held += 1;
          q.to = held + PAGE > MAX_ROUTE_ROWS ? pageTs - 1 : pageTs;
          q.limit = Math.min(MAX_ROUTE_ROWS, held + PAGE);
        }
        const res = await api('GET', '/members/' + encodeURIComponent(member) + '/activity', {query: q});
        if (!alive || g !== gen) return;
        const rows = Array.isArray(res && res.activity) ? res.activity : [];
        for (const r of rows) {
          insert(r);
          const ts = Number(r && r.ts);
          if (Number.isFinite(ts) && ts < pageTs) pageTs = ts;
        }
        exhausted = rows.length < q.limit;
        if (!olderPage) {
          let newest = null;
          for (const r of rows) { const id = String(r && r.id); if (/^[0-9]{1,19}$/.test(id) && (newest === null || BigInt(id) > newest)) newest = BigInt(id); }
          if (newest !== null) newestId = newest.toString();
          if (newestId && stream) stream.advance(newestId);
        }
        if (!nodes.size) replace(list, h('li', {class: 'empty'}, 'No activity yet.'));
        older.hidden = exhausted;
        tlStatus.clear();
      } catch (err) {
        if (alive && g === gen) tlStatus.error(err);
      } finally {
        if (g === gen) older.disabled = false;
      }
    };

    // The stream opens after the first page, resuming after its newest id,
    // so a row stored between the two is replayed rather than lost.
    let newestId = '';
    const startStream = () => {
      if (stream) stream.stop();
      stream = new ResumableStream('/members/' + encodeURIComponent(member) + '/activity/stream', {
        event: 'activity',
        onItem: (row) => { if (alive) insert(row); },
        onState: (st) => { liveNote.dataset.state = st; liveNote.textContent = st === 'live' ? 'Live' : st === 'idle' ? '' : 'Reconnecting…'; },
        onDrop: () => { api('GET', '/session').catch(() => {}); },
      });
      if (newestId) stream.advance(newestId);
      stream.start();
    };

    kindSel.addEventListener('change', () => {
      gen += 1;
      nodes.clear(); pageTs = Infinity; replace(list);
      loadPage(false);
    });

    // --- usage
    const rangeSel = h('select', {id: 'usage-range', name: 'range'}, Object.entries(RANGES).map(([k, r]) => h('option', {value: k, selected: k === '7d'}, r.label)));
    const metricSel = h('select', {id: 'usage-metric', name: 'metric'}, h('option', {value: 'tokens'}, 'Tokens'), h('option', {value: 'cost'}, 'Cost (USD)'));
    const usageStatus = status();
    const chartBox = h('div', {class: 'chart-box'});
    const usageTable = h('div', {class: 'usage-table'});
    const usageSum = h('p', {class: 'facts', id: 'usage-summary'});
    let buckets = [];
    let drawnWidth = 0;
    const onResize = () => { if (buckets.length && Math.abs(chartBox.clientWidth - drawnWidth) > 24) drawUsage(); };
    window.addEventListener('resize', onResize);
    const drawUsage = () => {
      const cap = 'usage-caption';
      replace(chartBox,
        h('p', {id: cap, class: 'sr-only'}, `${metricSel.value === 'cost' ? 'Cost' : 'Tokens'} of ${member} per ${RANGES[rangeSel.value].ms === 3600e3 ? 'hour' : 'day'}, ${RANGES[rangeSel.value].label.toLowerCase()}; the table below has the figures.`),
        usageChart(buckets, metricSel.value, cap, chartBox.clientWidth));
      drawnWidth = chartBox.clientWidth;
      replace(usageTable, h('details', {}, h('summary', {}, 'Usage as a table'), table([
        {label: 'Period', cell: (b) => b.label},
        {label: 'Input', cell: (b) => fmtInt(b.usage.inputTokens)},
        {label: 'Output', cell: (b) => fmtInt(b.usage.outputTokens)},
        {label: 'Cache read', cell: (b) => fmtInt(b.usage.cacheReadTokens)},
        {label: 'Cache write', cell: (b) => fmtInt(b.usage.cacheCreationTokens)},
        {label: 'Cost', cell: (b) => fmtCost(b.usage.costUsd)},
        {label: 'Exchanges', cell: (b) => fmtInt(b.usage.exchanges)},
      ], buckets, {caption: 'Usage of ' + member + ' by period'})));
      const tot = {inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheCreationTokens: 0, costUsd: 0, exchanges: 0};
      for (const b of buckets) for (const k of Object.keys(tot)) tot[k] += num(b.usage[k]);
      replace(usageSum, `In all: ${exchanges(tot.exchanges)}, ${usageText(tot)}, ${fmtCost(tot.costUsd)}.`);
    };
    const loadUsage = async () => {
      const r = RANGES[rangeSel.value] || RANGES['7d'];
      // Buckets end at the next whole hour (or day, local time) after now.
      const end = new Date();
      if (r.ms === 3600e3) end.setMinutes(60, 0, 0); else { end.setHours(24, 0, 0, 0); }
      const starts = [];
      for (let i = r.n; i >= 1; i--) starts.push(end.getTime() - i * r.ms);
      usageStatus.busy('Loading usage…');
      try {
        const got = await Promise.all(starts.map((from) => api('GET', '/members/' + encodeURIComponent(member) + '/usage', {query: {from, to: from + r.ms - 1}})));
        if (!alive) return;
        buckets = starts.map((from, i) => ({from, label: r.fmt(new Date(from)), usage: obj(got[i] && got[i].usage)}));
        drawUsage();
        usageStatus.clear();
      } catch (err) { if (alive) usageStatus.error(err); }
    };
    rangeSel.addEventListener('change', loadUsage);
    metricSel.addEventListener('change', () => { if (buckets.length) drawUsage(); });

    // --- objective trace
    const objSel = h('select', {id: 'trace-objective', name: 'objective'}, h('option', {value: ''}, 'Choose an objective…'));
    const traceStatus = status();
    const traceBox = h('div', {class: 'trace', 'aria-live': 'polite'});
    const openTrace = async (id) => {
      if (!id) { replace(traceBox); go({objective: ''}); return; }
      if (![...objSel.options].some((o) => o.value === id)) objSel.append(h('option', {value: id}, id));
      objSel.value = id;
      go({objective: id});
      traceStatus.busy('Loading the trace…');
      try {
        const path = '/objectives/' + encodeURIComponent(id);
        const [tr, us] = await Promise.all([api('GET', path + '/trace'), api('GET', path + '/usage').catch(() => null)]);
        if (!alive || objSel.value !== id) return;
        const rows = Array.isArray(tr && tr.rows) ? tr.rows : [];
        const label = objSel.selectedOptions[0] ? objSel.selectedOptions[0].textContent : id;
        replace(traceBox,
          h('h3', {id: 'trace-title', tabindex: '-1'}, 'Trace of ', label),
          us ? usageSummary(us) : null,
          tr && tr.truncated ? h('p', {class: 'notice'}, 'The trace is longer than one answer: these are its first rows.') : null,
          rows.length ? traceConversation(rows) : h('p', {class: 'empty'}, 'Nothing was recorded while this objective was held.'));
        traceStatus.clear();
      } catch (err) { if (alive) { replace(traceBox); traceStatus.error(err); } }
    };
    objSel.addEventListener('change', () => openTrace(objSel.value));

    main.append(h('section', {class: 'page activity'},
      head,
      h('section', {class: 'act-sec', 'aria-labelledby': 'tl-h'},
        h('div', {class: 'sec-head'}, h('h2', {id: 'tl-h'}, 'Timeline'), liveNote),
        h('div', {class: 'controls'}, field('Show', kindSel)),
        tlStatus.node, list, older),
      h('section', {class: 'act-sec', 'aria-labelledby': 'usage-h'},
        h('h2', {id: 'usage-h'}, 'Usage'),
        h('div', {class: 'controls'}, field('Period', rangeSel), field('Measure', metricSel)),
        usageStatus.node, chartBox, usageSum, usageTable),
      h('section', {class: 'act-sec', 'aria-labelledby': 'trace-h'},
        h('h2', {id: 'trace-h'}, 'Objective trace'),
        h('div', {class: 'controls'}, field('Objective', objSel)),
        traceStatus.node, traceBox)));

    loadPage(false).then(() => { if (alive) startStream(); });
    loadUsage();
    (async () => {
      try {
        const [ms, os] = await Promise.all([canReadAll ? api('GET', '/members') : null, api('GET', '/objectives')]);
        if (!alive) return;
        if (ms && Array.isArray(ms.members)) {
          const names = ms.members.map((m) => str(obj(m).name)).filter((n) => n && n !== member).sort();
          picker.append(...names.map((n) => h('option', {value: n}, n)));
        }
        const objs = Array.isArray(os && os.objectives) ? os.objectives : [];
        const cur = objSel.value;
        objs.sort((a, b) => num(b.updatedAt) - num(a.updatedAt));
        for (const o of objs.slice(0, 500)) {
          const id = str(o.id);
          if (!id) continue;
          const text = `${str(o.title) || id} — ${str(o.assignee)} (${str(o.status)})`;
          const ex = [...objSel.options].find((x) => x.value === id);
          if (ex) ex.textContent = text; else objSel.append(h('option', {value: id}, text));
        }
        objSel.value = cur;
      } catch (err) { if (alive) traceStatus.error(err); }
      const want = url.searchParams.get('objective');
      if (want && /^[A-Za-z0-9._:-]{1,128}$/.test(want) && alive) openTrace(want);
    })();

    return () => {
      alive = false;
      window.removeEventListener('resize', onResize);
      if (stream) stream.stop();
    };
  },
};

