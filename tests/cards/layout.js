#!/usr/bin/env node
// Renders Adaptive Cards with Microsoft's renderer for JavaScript (npm adaptivecards) in chromium and reports
// layout defects found in the DOM. Used by tests/cards/test_card_layout.py; also runnable by hand:
//
//   node tests/cards/layout.js INPUT.json            # prints {"rendered": N, "defects": [...]} on stdout
//
// INPUT.json: {"cards": [{"name": "...", "card": {...}}], "widths": [320, 480], "themes": ["light", "dark"],
//              "screenshots": "DIR or null", "shoot": ["names of cards to screenshot"]}
// Every card is rendered at every width in every theme (hostconfig-THEME.json beside this file), all on one
// page of one browser. A defect is one of:
//   word-broken   a word of letters, or any token under 16 characters, laid out on more than one line: "Hig/h"
//                 (a short token of code may end a line between two punctuation marks: '"n;&' / '(gal')
//   cut           an element that hides part of its content (overflow hidden, ellipsis, maxLines)
//   overflow      an element whose content spills out of it
//   too-wide      an element reaching outside the card
//   button-cut    a button whose label is not shown whole
// Long identifiers (hashes, URLs, emails, paths: tokens with digits or separators) may wrap anywhere: that is
// layout, and what is copied stays the value. A run of 16 characters or more without a space that holds a digit or
// one of . / \ : @ _ = & ? % is such an identifier as a whole ("cdn.example.net/gh/browse-fb", which the browser
// does not break after its slashes), so the words inside it are not checked one by one.

const fs = require('fs');
const path = require('path');
const { chromium } = require('playwright-core');

const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--font-render-hinting=none'];
const HERE = __dirname;
const RENDERER = path.join(HERE, 'node_modules', 'adaptivecards', 'dist', 'adaptivecards.min.js');
const RENDERER_CSS = path.join(HERE, 'node_modules', 'adaptivecards', 'dist', 'adaptivecards.css');

// Runs in the page: render one card into a fresh box of the given width and list what is wrong with it.
function renderAndCheck({ card, width, hostConfig, id }) {
  const AC = window.AdaptiveCards;
  const box = document.createElement('div');
  box.id = id;
  box.style.cssText = `width:${width}px;display:inline-block;vertical-align:top;margin:8px;` +
    `background:${hostConfig.containerStyles.default.backgroundColor}`;
  document.body.appendChild(box);
  const adaptive = new AC.AdaptiveCard();
  adaptive.hostConfig = new AC.HostConfig(hostConfig);
  const problems = [];
  const context = new AC.SerializationContext();
  adaptive.parse(card, context);
  for (let i = 0; i < context.eventCount; i++) {  // what the renderer could not read (Teams' charts aside)
    const e = context.getEventAt(i);
    if (e.message && !/Chart\./.test(e.message)) problems.push({ kind: 'parse', detail: e.message });
  }
  const rendered = adaptive.render();
  if (!rendered) return [{ kind: 'render', detail: 'the renderer returned nothing' }];
  box.appendChild(rendered);
  return problems.concat(findDefects(rendered));

  function label(el) {
    const text = (el.innerText || el.textContent || '').replace(/\s+/g, ' ').trim();
    return `${el.tagName.toLowerCase()}${el.className ? '.' + String(el.className).split(' ')[0] : ''} "${text.slice(0, 80)}"`;
  }

  function visible(el) {
    const r = el.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && getComputedStyle(el).visibility !== 'hidden';
  }

  // Whether every line break inside ``token`` falls between two punctuation marks or symbols (code: '"n;&' / '(gal'),
  // never beside a letter or digit ("Hig" / "h", "[10" / "]").
  function brokenBetweenMarks(node, start, token) {
    const top = (i) => {
      const range = document.createRange();
      range.setStart(node, start + i);
      range.setEnd(node, start + i + 1);
      const rect = [...range.getClientRects()].find((x) => x.width > 0);
      return rect ? Math.round(rect.top) : null;
    };
    const mark = (c) => /[\p{P}\p{S}]/u.test(c);
    for (let i = 1; i < token.length; i++) {
      const before = top(i - 1);
      const after = top(i);
      if (before !== null && after !== null && before !== after && !(mark(token[i - 1]) && mark(token[i]))) return false;
    }
    return true;
  }

  function findDefects(root) {
    const found = [];
    const edge = root.getBoundingClientRect();
    for (const el of root.querySelectorAll('*')) {
      if (!visible(el)) continue;
      const style = getComputedStyle(el);
      const r = el.getBoundingClientRect();
      if (r.right > edge.right + 0.5 || r.left < edge.left - 0.5) {
        found.push({ kind: 'too-wide', detail: `${label(el)} spans ${Math.round(r.left - edge.left)}..` +
          `${Math.round(r.right - edge.left)} px of ${Math.round(edge.width)}` });
      }
      const hides = /hidden|clip/.test(style.overflowX + style.overflowY) || style.textOverflow === 'ellipsis';
      const wider = el.scrollWidth > el.clientWidth + 1;
      const taller = el.scrollHeight > el.clientHeight + 1;
      if (!el.firstChild || !(wider || taller)) continue;
      const inButton = el.closest('button, .ac-pushButton');
      if (inButton) found.push({ kind: 'button-cut', detail: label(inButton) });
      else if (hides) found.push({ kind: 'cut', detail: `${label(el)} shows ${el.clientWidth}x${el.clientHeight} ` +
        `of ${el.scrollWidth}x${el.scrollHeight}` });
      else if (wider && style.display !== 'inline') found.push({ kind: 'overflow', detail: label(el) });
    }
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (!node.parentElement || !visible(node.parentElement)) continue;
      const identifiers = [...node.data.matchAll(/[^\s\u200b]{16,}/g)]
        .filter((run) => /[\d./\\:@_=&?%]/.test(run[0])).map((run) => [run.index, run.index + run[0].length]);
      // A line may end at a space, a zero-width space, or after a hyphen or slash.
      for (const match of node.data.matchAll(/[^\s\u200b\-‐/]+[\-‐/]?/g)) {
        if (identifiers.some(([from, to]) => match.index >= from && match.index < to)) continue;
        // A word of letters, or any token short enough for a phone's narrowest column ("[10]", "#14431", "14h"),
        // brackets and punctuation included (a line never needs to break beside them); longer identifiers (hashes,
        // URLs, emails) may wrap anywhere.
        const token = match[0];
        const word = token.replace(/^[\p{P}\p{S}]+(?=.)|[\p{P}\p{S}]+$/gu, '');
        if (token.length < 2 || !(/^\p{L}+$/u.test(word) || token.length < 16)) continue;
        const start = match.index;
        const range = document.createRange();
        range.setStart(node, start);
        range.setEnd(node, start + token.length);
        const lines = new Set([...range.getClientRects()].filter((x) => x.width > 0).map((x) => Math.round(x.top)));
        if (lines.size > 1 && !brokenBetweenMarks(node, start, token)) {
          found.push({ kind: 'word-broken', detail: `"${token}" on ${lines.size} lines in ` + label(node.parentElement) });
        }
      }
    }
    return found;
  }
}

async function main() {
  const input = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  const configs = {};
  for (const theme of input.themes) {
    configs[theme] = JSON.parse(fs.readFileSync(path.join(HERE, `hostconfig-${theme}.json`), 'utf8'));
  }
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true, args: FLAGS });
  const out = { rendered: 0, defects: [], shots: [] };
  try {
    const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    await page.setContent('<!doctype html><html><head><meta charset="utf-8"></head><body style="margin:0"></body></html>');
    await page.addStyleTag({ content: fs.readFileSync(RENDERER_CSS, 'utf8') });
    await page.addScriptTag({ content: fs.readFileSync(RENDERER, 'utf8') });
    const shoot = new Set(input.shoot || []);
    let n = 0;
    for (const theme of input.themes) {
      await page.evaluate((bg) => { document.body.style.background = bg; },
        configs[theme].containerStyles.default.backgroundColor);
      for (const width of input.widths) {
        for (const { name, card } of input.cards) {
          const id = `card-${n++}`;
          const found = await page.evaluate(renderAndCheck, { card, width, hostConfig: configs[theme], id });
          out.rendered += 1;
          for (const d of found) out.defects.push({ card: name, width, theme, ...d });
          if (input.screenshots && shoot.has(name)) {
            const file = path.join(input.screenshots, `${name}-${width}-${theme}.png`);
            await page.locator(`#${id}`).screenshot({ path: file });
            out.shots.push(file);
          }
          await page.evaluate((i) => document.getElementById(i).remove(), id);
        }
      }
    }
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().catch((error) => { process.stderr.write(String(error && error.stack || error) + '\n'); process.exit(1); });
