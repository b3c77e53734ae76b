"""Scrapling and AutoScraper on the markup-change corpus, beside crawlfleet.

Reads the corpus as JSON lines (`cargo run -p markup-corpus --example dump`)
and, for every changed page, asks each peer to read the page's items after its
site changed the markup, knowing what a crawler knew before the change:

- spec kept: the site's original selectors applied to the changed page (what
  a crawler with no repair stores);
- Scrapling adaptive: the original selectors run on the page as it was, with
  `auto_save` (Scrapling keeps each element's fingerprint), then on the
  changed page with `adaptive=True` (an element the selector no longer finds
  is relocated by its fingerprint), the item's siblings by `find_similar()`,
  and each field relocated inside each item;
- AutoScraper rules kept: rules built on the page as it was from the values
  of two of its items (`wanted_dict`), applied to the changed page with
  `get_result_similar`;
- AutoScraper relearned: rules built on the changed page from those same
  last-known values (what a repair from the last good run can do with it).

And on every page (original or changed), selectors from examples: AutoScraper
built on the page from two examples per field, its similar results read
back. crawlfleet's figures for the same pages (selectors from examples, and
"crawlfleet repair": a repair from the last good run's items, verified on the
changed page as a worker verifies it) come from `cargo bench --bench learn`
(LEARN_RESULTS=file) when given with --ours.

A result is exact when it gives the page's items, every field equal
(whitespace collapsed, links made absolute against the page); wrong when it
gives items that are not (a crawler would store wrong values: a false
repair, as neither peer verifies a result before use); none when it gives
none. CPU is this process's time per page, per peer.

    python3 repair_peers.py corpus.jsonl [--ours learn-results.jsonl]

Exits non-zero when the original selectors do not read the original markup
exactly (the corpus or this script is wrong), or a peer raises.
"""

import argparse
import collections
import json
import logging
import os
import sys
import tempfile
import time
from urllib.parse import urljoin

from autoscraper import AutoScraper
from lxml import html as lxml_html
from scrapling.parser import Selector

PAGE_URL = "http://shop.test/search?q=kettle"


def clean(text):
    return " ".join((text or "").split())


def value_of(node_text, attr_value, attr):
    return clean(attr_value) if attr else clean(node_text)


def normalise(field, value):
    value = clean(value)
    if field in ("link", "image") and value:
        return urljoin(PAGE_URL, value)
    return value


def verdict(got, want):
    """exact, wrong or none: `got` a list of items (dicts of str)."""
    if not got:
        return "none"
    if len(got) != len(want):
        return "wrong"
    for g, w in zip(got, want):
        for field, value in w.items():
            if normalise(field, g.get(field, "")) != value:
                return "wrong"
    return "exact"


# The site's own selectors, read with lxml.


def read_with_spec(page_html, spec):
    root = lxml_html.fromstring(page_html)
    items = []
    for element in root.cssselect(spec["item"]):
        item = {}
        for field in spec["fields"]:
            node = element
            if field["selector"]:
                found = element.cssselect(field["selector"])
                node = found[0] if found else None
            if node is None:
                item[field["name"]] = ""
            elif field["attr"]:
                item[field["name"]] = clean(node.get(field["attr"], ""))
            else:
                item[field["name"]] = clean(node.text_content())
        items.append(item)
    return items


# Scrapling.


def scrapling_text(selector):
    return clean(selector.get_all_text(separator=" "))


def scrapling_repair(case, storage_dir):
    spec = case["spec"]
    storage = {"storage_file": os.path.join(storage_dir, "scrapling.db")}
    url = f"http://shop.test/{abs(hash(case['name']))}"
    was = Selector(case["before_html"], url=url, adaptive=True, storage_args=storage)
    first = was.css(spec["item"], identifier="item", auto_save=True)
    if not first:
        return []
    for field in spec["fields"]:
        if field["selector"]:
            first[0].css(field["selector"], identifier=field["name"], auto_save=True)
    now = Selector(case["html"], url=url, adaptive=True, storage_args=storage)
    items = list(now.css(spec["item"], identifier="item", adaptive=True))
    if len(items) == 1:
        # Relocation gave one best match (ties give several): its like are
        # the other items. (Always adding its like scores lower: it takes ads.)
        items += list(items[0].find_similar())
        order = {el: i for i, el in enumerate(now._root.iter())}
        items.sort(key=lambda s: order.get(s._root, 0))
    got = []
    for item in items:
        values = {}
        for field in spec["fields"]:
            node = item
            if field["selector"]:
                found = item.css(field["selector"], identifier=field["name"], adaptive=True)
                node = found[0] if found else None
            if node is None:
                values[field["name"]] = ""
            elif field["attr"]:
                values[field["name"]] = clean(node.attrib.get(field["attr"], ""))
            else:
                values[field["name"]] = scrapling_text(node)
        got.append(values)
    return got


# AutoScraper.


def autoscraper_read(scraper, page_html, fields):
    """Per field the values of its rule that matches the most elements (a
    field's examples often give it several rules, each the same values),
    zipped into items by place."""
    found = scraper.get_result_similar(
        url=PAGE_URL, html=page_html, grouped=True, unique=False, keep_order=True
    )
    alias = {rule["stack_id"]: rule["alias"] for rule in scraper.stack_list}
    columns = {f: [] for f in fields}
    for rule, values in found.items():
        field = alias.get(rule)
        if field in columns and len(values) > len(columns[field]):
            columns[field] = values
    if not any(columns.values()):
        return []
    rows = max(len(c) for c in columns.values())
    return [
        {f: (c[i] if i < len(c) else "") for f, c in columns.items()}
        for i in range(rows)
    ]


def autoscraper_built(page_html, examples):
    scraper = AutoScraper()
    scraper.build(url=PAGE_URL, html=page_html, wanted_dict=examples)
    return scraper


def fields_of(case):
    return [f["name"] for f in case["spec"]["fields"]]


def autoscraper_rules_kept(case):
    scraper = autoscraper_built(case["before_html"], case["before_examples"])
    return autoscraper_read(scraper, case["html"], fields_of(case))


def autoscraper_relearned(case):
    scraper = autoscraper_built(case["html"], case["before_examples"])
    return autoscraper_read(scraper, case["html"], fields_of(case))


def autoscraper_examples(case):
    scraper = autoscraper_built(case["html"], case["examples"])
    return autoscraper_read(scraper, case["html"], fields_of(case))


# The run.


class Tally:
    def __init__(self):
        self.counts = collections.Counter()
        self.cpu = 0.0

    def add(self, result, cpu):
        self.counts[result] += 1
        self.cpu += cpu

    def pages(self):
        return sum(self.counts.values())

    def cells(self):
        n = max(self.pages(), 1)
        return (
            f"{100 * self.counts['exact'] / n:6.1f} % {100 * self.counts['wrong'] / n:6.1f} % "
            f"{1000 * self.cpu / n:8.2f}"
        )


def measure(run, case):
    started = time.process_time()
    try:
        got = run(case)
    except Exception as error:  # a peer that raises on a page fails the bench
        raise SystemExit(f"{run.__name__} raised on {case['name']}: {error!r}")
    return verdict(got, case["items"]), time.process_time() - started


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("corpus")
    parser.add_argument("--ours", help="cargo bench --bench learn's LEARN_RESULTS file")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    cases = [json.loads(line) for line in open(args.corpus, encoding="utf-8")]

    broken = [
        c["name"]
        for c in cases
        if verdict(read_with_spec(c["before_html"], c["spec"]), c["before_items"]) != "exact"
    ]
    if broken:
        raise SystemExit(f"the original selectors do not read the original markup: {broken[:5]}")

    ours = {}
    if args.ours:
        for line in open(args.ours, encoding="utf-8"):
            row = json.loads(line)
            ours[row["name"]] = row

    repairs = {
        "spec kept": lambda c: read_with_spec(c["html"], c["spec"]),
        "Scrapling adaptive": None,
        "AutoScraper rules kept": autoscraper_rules_kept,
        "AutoScraper relearned": autoscraper_relearned,
    }
    # crawlfleet's repair (verified on the changed page, as a worker repairs
    # a site) comes from the learn bench's rows, beside the peers.
    if args.ours:
        repairs["crawlfleet repair"] = None
    by_tool = collections.defaultdict(Tally)
    by_layout = collections.defaultdict(Tally)
    by_kind = collections.defaultdict(Tally)
    examples = collections.defaultdict(Tally)
    with tempfile.TemporaryDirectory() as storage_dir:
        repairs["Scrapling adaptive"] = lambda c: scrapling_repair(c, storage_dir)
        for case in cases:
            result, cpu = measure(autoscraper_examples, case)
            examples["AutoScraper"].add(result, cpu)
            if case["name"] in ours:
                row = ours[case["name"]]
                examples["crawlfleet"].add(row["examples"], row["cpu_ms"] / 1000)
            if not case["kinds"]:
                continue
            for tool, run in repairs.items():
                if tool == "crawlfleet repair":
                    row = ours.get(case["name"])
                    if row is None or "repair" not in row:
                        raise SystemExit(f"crawlfleet's results have no repair of {case['name']}")
                    result, cpu = row["repair"], row["repair_cpu_ms"] / 1000
                else:
                    result, cpu = measure(run, case)
                by_tool[tool].add(result, cpu)
                by_layout[(tool, case["layout"])].add(result, cpu)
                for kind in case["kinds"]:
                    by_kind[(tool, kind)].add(result, cpu)

    changed = sum(1 for c in cases if c["kinds"])
    print(f"\nrepair after a markup change: {changed} changed pages, knowing the page before it")
    print(f"{'':<26} {'exact':>8} {'wrong':>8} {'cpu ms':>8}")
    for tool in repairs:
        print(f"{tool:<26} {by_tool[tool].cells()}")
    for title, table, keys in (
        ("by layout", by_layout, sorted({c["layout"] for c in cases})),
        ("by change (a page with several changes counts under each)", by_kind,
         sorted({k for c in cases for k in c["kinds"]})),
    ):
        print(f"\n{title}: exact % per tool ({', '.join(repairs)})")
        for key in keys:
            cells = " ".join(
                f"{100 * table[(t, key)].counts['exact'] / max(table[(t, key)].pages(), 1):7.1f}"
                for t in repairs
            )
            print(f"  {key:<24} {cells}")
    print(f"\nselectors from 2 examples per field: {len(cases)} pages")
    print(f"{'':<26} {'exact':>8} {'wrong':>8} {'cpu ms':>8}")
    for tool, tally in examples.items():
        print(f"{tool:<26} {tally.cells()}   ({tally.pages()} pages)")
    if args.ours and examples["crawlfleet"].pages() != len(cases):
        raise SystemExit("crawlfleet's results do not cover every page of the corpus")
    return 0


if __name__ == "__main__":
    sys.exit(main())
