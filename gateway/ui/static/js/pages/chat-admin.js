// Channel administration in chat: create a channel, browse and join the
// ones you are not in, and, for the open channel, its members, rename,
// archive, add or remove members, and leave. The broker decides who may do
// what (channel admin or members.manage); the page only offers what the
// caller's role makes possible and shows the broker's answer otherwise.
// Requests name a channel by its stable id, so a rename elsewhere does not
// break an open panel.
import {h, replace, append} from '../h.js';
import {api} from '../api.js';
import {field, form, status, confirmDialog} from '../ui.js';

// SLUG_RE is the spec's slug grammar: 1 to 32 lowercase letters, digits
// and single dashes, starting and ending alphanumeric.
export const SLUG_RE = /^[a-z0-9](?:[a-z0-9]|-(?=[a-z0-9])){0,31}$/;
const SLUG_HINT = '1 to 32 lowercase letters, digits and single dashes';
const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

function slugOf(input) {
  const slug = input.value.trim();
  if (!SLUG_RE.test(slug)) throw new Error('A channel name is ' + SLUG_HINT + ', starting and ending with a letter or digit.');
  return slug;
}

function channelOf(res) { return res && res.channel && typeof res.channel === 'object' ? res.channel : res; }

// newChannelForm creates a channel; onCreated(channel) after.
export function newChannelForm(onCreated) {
  const input = h('input', {type: 'text', id: 'new-channel', name: 'slug', autocomplete: 'off', spellcheck: 'false', maxlength: '32', required: true});
  return h('details', {class: 'chan-tool'}, h('summary', {}, 'New channel'),
    form({label: 'New channel', submit: 'Create channel', busy: 'Creating…', cls: 'card', action: async () => {
      const slug = slugOf(input);
      const ch = channelOf(await api('POST', '/channels', {body: {slug}}));
      input.value = '';
      onCreated(ch);
      return 'Created #' + slug + '.';
    }}, field('Channel name', input, SLUG_HINT)));
}

// browseChannels lists channels the member is not in (join) and archived
// ones (read). onJoined(channel) after a join.
export function browseChannels(channels, me, onJoined) {
  const open = channels.filter((c) => !c.joined && !c.archivedAt && c.id !== 'general');
  const archived = channels.filter((c) => c.archivedAt);
  const st = status();
  const row = (c) => h('li', {},
    h('span', {class: 'name'}, '#' + c.slug),
    h('button', {type: 'button', class: 'quiet', 'aria-label': 'Join #' + c.slug, onclick: async (e) => {
      e.target.disabled = true;
      try {
        await api('POST', '/channels/' + encodeURIComponent(c.id) + '/members', {body: {member: me}});
        onJoined(c);
      } catch (err) { st.error(err); e.target.disabled = false; }
    }}, 'Join'));
  return h('details', {class: 'chan-tool'}, h('summary', {}, `Browse channels (${open.length})`),
    h('div', {class: 'card'},
      open.length ? h('ul', {class: 'chan-browse'}, open.map(row)) : h('p', {class: 'empty'}, 'You are in every open channel.'),
      archived.length ? [h('h3', {}, 'Archived'), h('ul', {class: 'chan-browse'}, archived.map((c) => h('li', {},
        h('a', {href: '/ui/chat?c=' + encodeURIComponent('chan:' + c.id), 'data-nav': ''}, '#' + c.slug), ' (archived)')))] : null,
      st.node));
}

// channelPanel is the open channel's settings: members and the actions
// the caller's role allows. summary is its ChannelSummary (may be null
// while loading); onChanged() refetches the channel list; onLeft() after
// leaving or archiving.
export function channelPanel(id, summary, {me, canManage, onChanged, onLeft}) {
  const members = h('ul', {class: 'chan-members', 'aria-label': 'Members'});
  const st = status();
  const isAdmin = () => canManage || (summary && summary.myRole === 'admin');
  const archived = !!(summary && summary.archivedAt);
  const path = '/channels/' + encodeURIComponent(id);
  const body = h('div', {class: 'card'});

  const load = async () => {
    try {
      const res = await api('GET', path);
      const list = Array.isArray(res && res.members) ? res.members : [];
      replace(members, list.filter((m) => m && typeof m.member === 'string').map((m) => h('li', {},
        h('span', {class: 'name'}, m.member), m.role === 'admin' ? h('span', {class: 'role'}, ' (admin)') : null,
        isAdmin() && m.member !== me && !archived ? h('button', {type: 'button', class: 'quiet', 'aria-label': 'Remove ' + m.member, onclick: async () => {
          try {
            await api('DELETE', path + '/members/' + encodeURIComponent(m.member));
            st.ok('Removed ' + m.member + '.');
            load();
          } catch (err) { st.error(err); }
        }}, 'Remove') : null)));
    } catch (err) { st.error(err); }
  };

  const rename = h('input', {type: 'text', name: 'slug', autocomplete: 'off', spellcheck: 'false', maxlength: '32', value: summary ? summary.slug : ''});
  const addName = h('input', {type: 'text', name: 'member', autocomplete: 'off', spellcheck: 'false', maxlength: '64'});
  const addRole = h('select', {name: 'role'}, h('option', {value: 'member', selected: true}, 'member'), h('option', {value: 'admin'}, 'admin'));

  append(body, [
    h('h3', {}, 'Members'), members,
    summary && summary.joined ? h('button', {type: 'button', class: 'quiet', onclick: async () => {
      if (!await confirmDialog('Leave #' + summary.slug + '?', {yes: 'Leave'})) return;
      try {
        await api('DELETE', path + '/members/' + encodeURIComponent(me));
        onLeft('Left #' + summary.slug + '.');
      } catch (err) { st.error(err); }
    }}, 'Leave channel') : null,
    isAdmin() && !archived ? [
      form({label: 'Add a member', submit: 'Add member', busy: 'Adding…', action: async () => {
        const name = addName.value.trim();
        if (!NAME_RE.test(name)) throw new Error('Type a member name.');
        await api('POST', path + '/members', {body: {member: name, role: addRole.value}});
        addName.value = '';
        load();
        return 'Added ' + name + '.';
      }}, field('Member', addName), field('Role', addRole)),
      form({label: 'Rename channel', submit: 'Rename', busy: 'Renaming…', action: async () => {
        const slug = slugOf(rename);
        await api('PATCH', path, {body: {slug}});
        onChanged();
        return 'Renamed to #' + slug + '.';
      }}, field('New name', rename, SLUG_HINT)),
      h('button', {type: 'button', class: 'danger', onclick: async () => {
        if (!await confirmDialog('Archive #' + (summary ? summary.slug : id) + '? Nobody can post to it afterwards; its history stays readable.', {yes: 'Archive', danger: true})) return;
        try {
          await api('DELETE', path);
          onLeft('Archived #' + (summary ? summary.slug : id) + '.');
        } catch (err) { st.error(err); }
      }}, 'Archive channel'),
    ] : null,
    st.node]);
  // The member list is fetched each time the panel is opened: joins and
  // leaves elsewhere have no events.
  const details = h('details', {class: 'chan-admin', ontoggle: () => { if (details.open) load(); }}, h('summary', {}, 'Channel settings'), body);
  return details;
}
