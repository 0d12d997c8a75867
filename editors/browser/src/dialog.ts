// A name asked in a modal <dialog> (new file, rename, a checkpoint's name):
// window.prompt would freeze the page's connection handling.
import { el } from "./dom";

/**
 * Asks for a line of text; resolves with it (trimmed), or undefined when
 * cancelled. check(value) may return a message that keeps the dialog open.
 */
export function askText(message: string, value = "", opts: { action?: string; check?: (v: string) => string | undefined; select?: [number, number] } = {}): Promise<string | undefined> {
  return new Promise((resolve) => {
    const input = el("input", { class: "ask-input", type: "text", spellcheck: "false", "aria-label": message }) as HTMLInputElement;
    input.value = value;
    const error = el("div", { class: "ask-error", role: "alert" });
    const ok = el("button", { class: "confirm-ok", type: "submit" }, opts.action ?? "OK");
    const cancel = el("button", { class: "confirm-cancel", type: "button" }, "Cancel");
    const form = el("form", { method: "dialog" }, el("p", {}, message), input, error, el("div", { class: "confirm-buttons" }, cancel, ok)) as HTMLFormElement;
    const dialog = el("dialog", { class: "confirm ask" }, form) as HTMLDialogElement;
    let result: string | undefined;
    form.onsubmit = (e) => {
      const v = input.value.trim();
      const bad = opts.check?.(v);
      if (bad) {
        e.preventDefault();
        error.textContent = bad;
        return;
      }
      result = v;
    };
    cancel.onclick = () => dialog.close();
    dialog.addEventListener("close", () => {
      resolve(result);
      dialog.remove();
    });
    document.body.append(dialog);
    dialog.showModal();
    input.focus();
    if (opts.select) input.setSelectionRange(opts.select[0], opts.select[1]);
    else input.select();
  });
}
