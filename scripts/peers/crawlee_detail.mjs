// The list -> detail peer in scripts/bench-peers: Crawlee's PuppeteerCrawler
// on the system Chromium, reading the demo shop's JavaScript-rendered search
// pages (wait for #ready), queueing every product's own page with
// `enqueueLinks` into a DETAIL handler that reads the product's title and
// price there: Crawlee's router pattern for a catalog.
//
//   node crawlee_detail.mjs <concurrency>
//
// Set up as crawlee_shop.mjs is (concurrency fixed, storage in memory, no
// retries, no fingerprints, one browser kept warm). It reads batches from
// stdin, one JSON array of list URLs per line, and answers each with one JSON
// line once every list page and every detail page it led to was handled:
// {"pages": n, "details": n, "failed": n, "items": n, "secs": wall seconds}.
// Each batch is a run of its own, as a new Crawlee process would be: its
// requests carry the batch's number in their unique keys, so a batch that
// names the same URLs as an earlier one reads them all again (Crawlee keeps
// no memory of what a run before found).
import readline from 'node:readline';

import { Configuration, PuppeteerCrawler } from '@crawlee/puppeteer';
import puppeteer from 'puppeteer-core';

const concurrency = Number(process.argv[2]);
if (!Number.isInteger(concurrency) || concurrency < 1) {
    console.error('usage: node crawlee_detail.mjs <concurrency>');
    process.exit(2);
}

let batch = null;
let batchNumber = 0;

function handled({ detail = false, items = 0, failed = false, queued = 0 }) {
    batch.expected += queued;
    batch.handled += 1;
    batch.pages += detail ? 0 : 1;
    batch.details += detail ? 1 : 0;
    batch.failed += failed ? 1 : 0;
    batch.items += items;
    if (batch.handled === batch.expected) {
        const secs = Number(process.hrtime.bigint() - batch.started) / 1e9;
        const { pages, details, failed: failures, items: found } = batch;
        batch = null;
        console.log(JSON.stringify({ pages, details, failed: failures, items: found, secs }));
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
            launcher: puppeteer,
            launchOptions: {
                executablePath: process.env.CHROME_PATH || '/usr/bin/chromium',
                headless: true,
                args: ['--no-sandbox'],
            },
        },
        async requestHandler({ request, page, enqueueLinks, pushData }) {
            if (request.label === 'DETAIL') {
                const item = await page.evaluate(() => ({
                    title: document.querySelector('h1')?.textContent ?? null,
                    price: document.querySelector('.price')?.textContent ?? null,
                }));
                await pushData({ url: request.url, ...item });
                handled({ detail: true, items: 1 });
                return;
            }
            await page.waitForSelector('#ready', { timeout: 10_000 });
            const run = request.userData.run;
            const { processedRequests } = await enqueueLinks({
                selector: 'li.product a.title',
                label: 'DETAIL',
                transformRequestFunction: (req) => {
                    req.uniqueKey = `${run}:${req.url}`;
                    // Crawlee keeps a request's label in its userData: keep it.
                    req.userData = { ...req.userData, run };
                    return req;
                },
            });
            const queued = processedRequests.filter((r) => !r.wasAlreadyPresent).length;
            handled({ queued });
        },
        failedRequestHandler({ request }, error) {
            console.error(`failed ${request.url}: ${error.message}`);
            handled({ detail: request.label === 'DETAIL', failed: true });
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
    batchNumber += 1;
    const run = batchNumber;
    batch = {
        expected: urls.length,
        handled: 0,
        pages: 0,
        details: 0,
        failed: 0,
        items: 0,
        started: process.hrtime.bigint(),
    };
    await crawler.addRequests(urls.map((url) => ({ url, uniqueKey: `${run}:${url}`, userData: { run } })));
}
await crawler.teardown();
process.exit(0);
