// The peer in scripts/bench-peers: Crawlee's PuppeteerCrawler on the system
// Chromium, reading the demo shop's JavaScript-rendered search pages the way
// crawlfleet's demo site does (wait for #ready, then every li.product's title,
// link, price and image).
//
//   node crawlee_shop.mjs <concurrency>
//
// Set up for a fair figure (docs/dependencies.md, "Peers"): concurrency fixed (min = max),
// storage in memory, no retries, no fingerprints, one browser kept warm
// across batches (keepAlive), Crawlee's own defaults otherwise. It reads
// batches from stdin, one JSON array of URLs per line, and answers each
// with one JSON line once every URL of the batch was handled:
// {"pages": n, "failed": n, "items": n, "secs": wall seconds}.
import readline from 'node:readline';

import { Configuration, PuppeteerCrawler } from '@crawlee/puppeteer';
import puppeteer from 'puppeteer-core';

const concurrency = Number(process.argv[2]);
if (!Number.isInteger(concurrency) || concurrency < 1) {
    console.error('usage: node crawlee_shop.mjs <concurrency>');
    process.exit(2);
}

let batch = null;

function handled(items, failed) {
    batch.pages += 1;
    batch.failed += failed ? 1 : 0;
    batch.items += items;
    if (batch.pages === batch.expected) {
        const secs = Number(process.hrtime.bigint() - batch.started) / 1e9;
        const { pages, failed: failures, items: found } = batch;
        batch = null;
        console.log(JSON.stringify({ pages, failed: failures, items: found, secs }));
    }
}

const crawler = new PuppeteerCrawler(
    {
        keepAlive: true,
        minConcurrency: concurrency,
        maxConcurrency: concurrency,
        maxRequestRetries: 0,
        requestHandlerTimeoutSecs: 30,
        navigationTimeoutSecs: 30,
        browserPoolOptions: { useFingerprints: false },
        launchContext: {
            // puppeteer-core: Crawlee would look for the full `puppeteer`.
            launcher: puppeteer,
            launchOptions: {
                executablePath: process.env.CHROME_PATH || '/usr/bin/chromium',
                headless: true,
                args: ['--no-sandbox'],
            },
        },
        async requestHandler({ page, pushData }) {
            await page.waitForSelector('#ready', { timeout: 10_000 });
            const items = await page.$$eval('li.product', (products) =>
                products.map((p) => ({
                    title: p.querySelector('a.title')?.textContent ?? null,
                    link: p.querySelector('a.title')?.getAttribute('href') ?? null,
                    price: p.querySelector('.price')?.textContent ?? null,
                    image: p.querySelector('img.thumb')?.getAttribute('src') ?? null,
                })),
            );
            await pushData(items);
            handled(items.length, false);
        },
        failedRequestHandler({ request }, error) {
            console.error(`failed ${request.url}: ${error.message}`);
            handled(0, true);
        },
    },
    new Configuration({ persistStorage: false, purgeOnStart: true }),
);

const running = crawler.run();
running.catch((e) => {
    console.error(e);
    process.exit(1);
});

const lines = readline.createInterface({ input: process.stdin });
for await (const line of lines) {
    const urls = JSON.parse(line);
    batch = { expected: urls.length, pages: 0, failed: 0, items: 0, started: process.hrtime.bigint() };
    await crawler.addRequests(urls);
}
await crawler.teardown();
process.exit(0);
