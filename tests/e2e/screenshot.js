#!/usr/bin/env node
// Screenshot of the Microsoft 365 Agents Playground page, driven the way a person would use it.
// Not part of the test suite (it needs a Chromium: apt-get install chromium; playwright-core downloads none).
//
//   .venv/bin/python -m tests.support.playground            # prints "Agents Playground: http://127.0.0.1:PORT/ ..."
//   node tests/e2e/screenshot.js --url http://127.0.0.1:PORT/ --say card --wait-text "Echo bot card" --out card.png
//
// Options
//   --url URL             the Playground page (required)
//   --out FILE.png        where to write the screenshot (default playground.png)
//   --conversation C      personal (default) | group | general | announcements: selected in the left rail
//   --say TEXT            (repeatable) typed into the conversation and sent. In the group chat and channels
//                         the bot is @mentioned first (picked from the "@" typeahead), as a person must for the
//                         bot to hear it. In a channel the first --say starts a new post ("Start a new post",
//                         then "Post"); later ones reply inside that thread (its "Type a message..." box).
//   --press TITLE         (repeatable) after the messages, click the last card button with this title
//                         (Action.Submit/Execute/ShowCard), each in turn once it shows
//   --before-press TEXT   (repeatable) wait until this text is visible before pressing (e.g. the card's heading)
//   --wait-text TEXT      (repeatable) wait until this text is visible before the screenshot; prints
//                         {"seen": TEXT, "at": ms since the epoch} when it is
//   --in-thread           (channels) the --wait-text texts must be inside the thread the messages went to
//   --count-text TEXT     (repeatable) after the waits, print {"count": TEXT, "n": how many elements show it}
//   --card-width N        every card drawn N px wide, as a phone shows it (320), whatever the viewport
//   --chart-labels        after the waits, print each chart's y-axis labels and how many px of each its chart cuts
//                         off: {"yLabel": "34.5", "cut": 10}
//   --hide-log            close the log panel on the right
//   --full-page           capture the whole scrollable page
//   --width N --height N  viewport (default 1400 x 900); --timeout MS for each wait (default 15000)
//   --chromium PATH       browser binary (default $CHROMIUM or /usr/bin/chromium)
//
// What the page does by itself: loading it sends installationUpdate + conversationUpdate (the app "installed")
// for each conversation the first time it is shown in that page, so a bot's welcome message appears; and it
// only shows bot messages that arrive while it is open (it has no history), plus the user's messages it sent.

const path = require('path');
const { chromium } = require('playwright-core');

const CHROMIUM_FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync'];
const MENTION_TRY_MS = 10000; // how long one attempt at the @mention typeahead waits
const CONVERSATIONS = {
  personal: { tree: 'Personal Chat', channel: false, mention: false },
  group: { tree: 'Group Chat', channel: false, mention: true },
  general: { tree: 'My Team - General', channel: true, mention: true },
  announcements: { tree: 'My Team - Announcements', channel: true, mention: true },
};

function parseArgs(argv) {
  const options = { out: 'playground.png', conversation: 'personal', say: [], waitText: [], countText: [], press: [],
    beforePress: [], width: 1400, height: 900, timeout: 15000, chromium: process.env.CHROMIUM || '/usr/bin/chromium',
    hideLog: false, fullPage: false, inThread: false, cardWidth: 0, chartLabels: false };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`${flag} needs a value`);
      return argv[++i];
    };
    switch (flag) {
      case '--url': options.url = next(); break;
      case '--out': options.out = next(); break;
      case '--conversation': options.conversation = next(); break;
      case '--say': options.say.push(next()); break;
      case '--press': options.press.push(next()); break;
      case '--before-press': options.beforePress.push(next()); break;
      case '--wait-text': options.waitText.push(next()); break;
      case '--count-text': options.countText.push(next()); break;
      case '--hide-log': options.hideLog = true; break;
      case '--in-thread': options.inThread = true; break;
      case '--full-page': options.fullPage = true; break;
      case '--width': options.width = Number(next()); break;
      case '--card-width': options.cardWidth = Number(next()); break;
      case '--chart-labels': options.chartLabels = true; break;
      case '--height': options.height = Number(next()); break;
      case '--timeout': options.timeout = Number(next()); break;
      case '--chromium': options.chromium = next(); break;
      default: throw new Error(`unknown option ${flag}`);
    }
  }
  if (!options.url) throw new Error('--url is required');
  if (!CONVERSATIONS[options.conversation]) {
    throw new Error(`--conversation must be one of ${Object.keys(CONVERSATIONS).join(', ')}`);
  }
  return options;
}

async function typeMessage(page, box, text, mention, timeout, reselect = null) {
  await box.click();
  if (mention) await mentionBot(page, box, timeout, reselect);
  await page.keyboard.type(text);
}

// "@Test" then the bot from the typeahead. On a busy machine the typeahead can fail to open (the keystrokes came
// before the editor was ready, or the click that selected the conversation was lost and the box is another
// chat's): the box is cleared and, after re-selecting the conversation, typed into again until the timeout.
async function mentionBot(page, box, timeout, reselect) {
  const item = page.getByRole('listbox', { name: 'Typeahead menu' }).getByRole('menuitem').first();
  for (let waited = 0; ; waited += MENTION_TRY_MS) {
    await page.keyboard.type('@Test');
    try {
      await item.waitFor({ timeout: MENTION_TRY_MS });
      break;
    } catch (error) {
      if (waited + MENTION_TRY_MS >= timeout) throw error;
      console.error(`no typeahead after ${MENTION_TRY_MS} ms: typing the mention again`);
      await page.keyboard.press('Control+A');
      await page.keyboard.press('Backspace');
      if (reselect) await reselect();
      await box.click();
    }
  }
  await item.click();
  await page.keyboard.type(' ');
}

async function select(page, conversation, timeout) {
  const item = page.getByRole('treeitem', { name: conversation.tree });
  const ready = conversation.channel ? page.getByRole('button', { name: 'Post', exact: true }) : null;
  // A click while the page is still settling (it installs the app in each conversation it shows) can be lost:
  // clicked again until the conversation shows.
  for (let waited = 0; ; waited += 3000) {
    try {
      await item.click({ timeout: 2000 });
    } catch {
      // Playwright finds the Group Chat item (its avatar group) "outside of the viewport" and never clicks it,
      // and narrow viewports hide the rail; a DOM click event on the item selects it all the same.
      await item.dispatchEvent('click');
    }
    if (ready === null) return;
    try {
      await ready.waitFor({ timeout: 3000 });
      return;
    } catch (error) {
      if (waited + 3000 >= timeout) throw error;
    }
  }
}

async function drive(page, conversation, options) {
  await page.goto(options.url, { waitUntil: 'networkidle', timeout: options.timeout });
  await select(page, conversation, options.timeout);
  await page.waitForTimeout(500);
  if (options.cardWidth) {  // a narrow viewport hides the Playground's compose box: the cards alone are narrowed
    const px = `${options.cardWidth}px !important`;
    await page.addStyleTag({ content: `.ac-adaptiveCard { width: ${px}; min-width: ${px}; max-width: ${px}; }` });
  }

  let thread = null; // the channel post the later messages reply in
  for (const text of options.say) {
    if (!conversation.channel) {
      await typeMessage(page, page.getByRole('textbox').last(), text, conversation.mention, options.timeout,
        () => select(page, conversation, options.timeout));
      await page.getByRole('button', { name: 'Send Message' }).last().click();
    } else if (thread === null) {
      const newPost = page.getByRole('group').filter({ has: page.getByRole('button', { name: 'Post', exact: true }) });
      await typeMessage(page, newPost.getByRole('textbox'), text, true, options.timeout);
      await newPost.getByRole('button', { name: 'Post', exact: true }).click();
      // Posts are listed newest first, after the new-post editor.
      thread = page.getByRole('group').filter({ hasText: text }).filter({
        has: page.getByRole('button', { name: 'Send Message' }) }).first();
      await thread.waitFor();
    } else {
      await typeMessage(page, thread.getByRole('textbox'), text, true, options.timeout);
      await thread.getByRole('button', { name: 'Send Message' }).click();
    }
    await page.waitForTimeout(700); // the bot answers in well under a second; --wait-text to be sure
  }
  if (options.press.length) {
    for (const text of options.beforePress) await page.getByText(text).last().waitFor({ state: 'visible' });
    for (const title of options.press) {
      await page.getByRole('button', { name: title, exact: true }).last().click();
      await page.waitForTimeout(700);
    }
  }
  let missing = null;
  // Where the user reads the answers: inside the thread the messages were posted in.
  const scope = options.inThread && thread ? thread : page;
  for (const text of options.waitText) {
    try {
      await scope.getByText(text).last().waitFor({ state: 'visible' });
      console.log(JSON.stringify({ seen: text, at: Date.now() }));
    } catch (error) {
      missing = error;
      break;
    }
  }
  for (const text of options.countText) {
    console.log(JSON.stringify({ count: text, n: await page.getByText(text).count() }));
  }
  if (options.chartLabels) {
    // Teams' charts (SVG) right-align the y-axis labels left of the plot: a label wider than the margin is cut
    // at the chart's left edge.
    const labels = await page.evaluate(() => [...document.querySelectorAll('.ac-adaptiveCard svg')].flatMap((svg) => {
      const left = svg.getBoundingClientRect().left;
      return [...svg.querySelectorAll('text')].filter((t) => getComputedStyle(t).textAnchor === 'end')
        .map((t) => ({ yLabel: t.textContent, cut: Math.max(0, Math.round(left - t.getBoundingClientRect().left)) }));
    }));
    for (const label of labels) console.log(JSON.stringify(label));
  }
  if (missing) throw missing;
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  const conversation = CONVERSATIONS[options.conversation];
  const browser = await chromium.launch({ executablePath: options.chromium, headless: true, args: CHROMIUM_FLAGS });
  try {
    const page = await browser.newPage({ viewport: { width: options.width, height: options.height } });
    page.setDefaultTimeout(options.timeout);
    // The page's own errors, e.g. "Saga error": the page restarts its websocket after one, and a bot message
    // arriving meanwhile is never drawn. Printed (stdout, one JSON line each) so a test can assert there are none.
    const pageErrors = [];
    page.on('console', (message) => { if (message.type() === 'error') pageErrors.push(message.text()); });
    page.on('pageerror', (error) => pageErrors.push(String(error)));
    let failure = null; // any step that fails still leaves a screenshot of what the user saw instead
    try {
      await drive(page, conversation, options);
    } catch (error) {
      failure = error;
    }
    try {
      if (options.hideLog) await page.getByRole('button', { name: 'Hide log panel' }).click({ timeout: 2000 });
    } catch {
      // the log panel is already closed, or the page never loaded
    }
    await page.waitForTimeout(300); // let the card renderer finish layout
    await page.screenshot({ path: path.resolve(options.out), fullPage: options.fullPage });
    console.log(path.resolve(options.out));
    for (const error of pageErrors) console.log(JSON.stringify({ pageError: error.slice(0, 500) }));
    if (failure) throw failure;
  } finally {
    await browser.close();
  }
}

main().catch((error) => {
  console.error(error.message || error);
  process.exit(1);
});
