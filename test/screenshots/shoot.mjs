// Photographs a page of the Temporal Web UI with headless Chromium through playwright-core:
//   node shoot.mjs CHROMIUM OUT.png URL [click:TEXT | TEXT]...
// In order, it clicks each click:TEXT and waits until each TEXT is on the page (the UI
// renders client-side and keeps long-polling, so "load" never means "drawn"), then writes a
// screenshot. PLAYWRIGHT_CORE_DIR names the installed playwright-core package.
import { createRequire } from 'node:module';
const require = createRequire(process.env.PLAYWRIGHT_CORE_DIR + '/');
const { chromium } = require('playwright-core');

const [executablePath, out, url, ...steps] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath,
  // The machine is offline: no background networking, updates or sync.
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync'],
});
try {
  const page = await browser.newPage({ viewport: { width: 1440, height: 1000 } });
  await page.goto(url);
  for (const step of steps) {
    if (step.startsWith('click:')) {
      await page.getByText(step.slice('click:'.length), { exact: true }).first().click({ timeout: 30000 });
    } else {
      await page.waitForFunction((t) => document.body.innerText.includes(t), step, { timeout: 30000 });
    }
  }
  await page.waitForTimeout(3000);
  await page.screenshot({ path: out });
} finally {
  await browser.close();
}
