// The page of an unknown /ui/ path.
import {h} from '../h.js';

export const notFoundPage = {
  title: 'Not found', auth: false,
  render(main) {
    main.append(h('section', {class: 'page narrow'},
      h('h1', {}, 'No such page'),
      h('p', {}, h('a', {href: '/ui/chat', 'data-nav': ''}, 'Go to Chat'))));
  },
};
