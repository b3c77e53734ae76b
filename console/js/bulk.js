// Acting on many rows of a list at once: a checkbox per row, one to select
// every row shown, one to select every row that matches (counted by the
// API), and a confirmation that says how many before anything changes.

import { h, show } from "./dom.js";

/** Asks `question` in a modal dialog; resolves true when confirmed. Esc keeps things as they are. */
export function confirmDialog(question, detail, confirmLabel) {
  return new Promise((resolve) => {
    const dialog = h("dialog", { id: "bulk-confirm-dialog", "aria-labelledby": "bulk-confirm-question" });
    const done = (answer) => {
      if (dialog.open) dialog.close();
      dialog.remove();
      resolve(answer);
    };
    show(dialog, h("form", { method: "dialog" },
      h("h2", { id: "bulk-confirm-question" }, question),
      detail ? h("p", { id: "bulk-confirm-detail" }, detail) : null,
      h("div", { class: "actions" },
        h("button", { type: "button", id: "bulk-confirm", onclick: () => done(true) }, confirmLabel),
        h("button", { type: "button", class: "secondary", id: "bulk-dismiss", onclick: () => done(false) }, "Keep as is"))));
    dialog.addEventListener("cancel", () => done(false));
    document.body.append(dialog);
    dialog.showModal();
    dialog.querySelector("#bulk-confirm").focus();
  });
}

/** "3 runs", "1 run". */
export const count = (n, noun) => `${n} ${noun}${n === 1 ? "" : "s"}`;

/**
 * A selection over a list's rows and the bar acting on it.
 *
 * - `id`: the bar's id (`runs-bulk`); its parts are named from it.
 * - `noun`: what a row is (`run`).
 * - `matching()`: how many rows match the list's filters now (a number, or
 *   "5000+"), for "select all matching".
 * - `actions`: `{ key, label, css, perform(target, dryRun) }`, `perform`
 *   answering `{ done, skippedWhy }` for `target` (`{ ids }` or `{ all: true }`).
 * - `after()`: reloads the list once an action is done.
 */
export function bulkBar({ id, noun, matching, actions, after, ctx }) {
  const picked = new Set();
  let all = false;
  const said = h("span", { id: `${id}-count`, role: "status" }, `no ${noun} selected`);
  const allBox = h("input", { type: "checkbox", id: `${id}-all-matching` });
  const allLabel = h("span", {}, `select every ${noun} that matches`);
  const buttons = actions.map((action) => h("button", {
    type: "button", class: action.css || "secondary", id: `${id}-${action.key}`, disabled: true,
    onclick: () => perform(action),
  }, action.label));
  const bar = h("div", { class: "bulk actions write-only", id, role: "group", "aria-label": `Act on selected ${noun}s` },
    h("label", { class: "check", for: allBox.id }, allBox, allLabel), said, buttons);

  const boxes = () => [...document.querySelectorAll(`input[data-pick="${id}"]`)];
  const refresh = (total) => {
    const n = all ? total : picked.size;
    said.textContent = n ? `${count(n, noun)} selected` : `no ${noun} selected`;
    for (const button of buttons) button.disabled = !all && picked.size === 0;
    const headBox = document.getElementById(`${id}-shown`);
    if (headBox) headBox.checked = !all && boxes().length > 0 && boxes().every((box) => box.checked);
  };
  let total = 0;
  allBox.addEventListener("change", async () => {
    all = allBox.checked;
    for (const box of boxes()) box.checked = all || picked.has(Number(box.dataset.id));
    if (all) {
      said.textContent = "counting…";
      try {
        total = await matching();
        allLabel.textContent = `select all ${total} matching`;
      } catch (e) {
        ctx.toast(e.message, { bad: true });
      }
    } else {
      allLabel.textContent = `select every ${noun} that matches`;
    }
    refresh(total);
  });

  const perform = async (action) => {
    const target = all ? { all: true } : { ids: [...picked] };
    try {
      const preview = await action.perform(target, true);
      if (preview.done === 0) {
        ctx.toast(`Nothing to ${action.label.toLowerCase()}${preview.skippedWhy ? `: ${preview.skippedWhy}` : ""}`, { bad: true });
        return;
      }
      const sure = await confirmDialog(`${action.label} ${count(preview.done, noun)}?`,
        preview.skippedWhy ? `Left as they are: ${preview.skippedWhy}.` : "",
        `${action.label} ${count(preview.done, noun)}`);
      if (!sure) return;
      const outcome = await action.perform(target, false);
      ctx.toast(`${action.past} ${count(outcome.done, noun)}${outcome.skippedWhy ? `; left as they are: ${outcome.skippedWhy}` : ""}`);
      reset();
      after();
    } catch (e) {
      ctx.toast(e.message, { bad: true });
    }
  };

  const reset = () => {
    picked.clear();
    all = false;
    allBox.checked = false;
    allLabel.textContent = `select every ${noun} that matches`;
    refresh(0);
  };

  return {
    bar,
    reset,
    /** The header cell: select every row shown. */
    headCell: () => h("th", { class: "pick write-only" }, h("input", {
      type: "checkbox", id: `${id}-shown`, "aria-label": `select every ${noun} shown`,
      onchange: (e) => {
        all = false;
        allBox.checked = false;
        for (const box of boxes()) {
          box.checked = e.target.checked;
          if (box.checked) picked.add(Number(box.dataset.id));
          else picked.delete(Number(box.dataset.id));
        }
        refresh(total);
      },
    })),
    /** A row's cell: select this row. Clicks and keys stay in it (the row opens its page). */
    rowCell: (rowId, name) => h("td", { class: "pick write-only" }, h("input", {
      type: "checkbox", dataset: { pick: id, id: rowId }, "aria-label": `select ${name}`, checked: all || picked.has(rowId),
      onclick: (e) => e.stopPropagation(),
      onkeydown: (e) => e.stopPropagation(),
      onchange: (e) => {
        if (all) {
          // Leaving "all matching" for the rows shown, less this one.
          all = false;
          allBox.checked = false;
          for (const box of boxes()) if (box.checked) picked.add(Number(box.dataset.id));
        }
        if (e.target.checked) picked.add(rowId);
        else picked.delete(rowId);
        refresh(total);
      },
    })),
  };
}

/** Skipped rows, grouped by why: "2 not failed or cancelled, 1 not found". */
export function why(groups) {
  return Object.entries(groups)
    .filter(([, n]) => n > 0)
    .map(([reason, n]) => `${n} ${reason}`)
    .join(", ");
}
