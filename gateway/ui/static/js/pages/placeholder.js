// Pages not built yet say so plainly.
import {h} from '../h.js';

export function notYetPage(title, what) {
  return {
    title, auth: true,
    render(main) {
      main.append(h('section', {class: 'page narrow'},
        h('h1', {}, title),
        h('p', {class: 'notice'}, `This page is not built yet. It will show ${what}.`),
        h('p', {}, 'Until then the same actions are available through the ', h('code', {}, 'svc'), ' command line and the REST API (GET /openapi.json).')));
    },
  };
}

export const notFoundPage = {
  title: 'Not found', auth: false,
  render(main) {
    main.append(h('section', {class: 'page narrow'},
      h('h1', {}, 'No such page'),
      h('p', {}, h('a', {href: '/ui/chat', 'data-nav': ''}, 'Go to Chat'))));
  },
};
