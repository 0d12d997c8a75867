// Splitters: drag handles between the page's panels. A splitter sets a CSS
// custom property (a size in px) on the element that holds the grid and
// keeps it in localStorage.
import { el } from "./dom";

export function splitter(grid: HTMLElement, prop: string, axis: "x" | "y", opts: { min: number; max: number; initial: number; invert?: boolean; key: string }): HTMLElement {
  const handle = el("div", { class: `splitter splitter-${axis}`, role: "separator", "aria-orientation": axis === "x" ? "vertical" : "horizontal" });
  const stored = Number(localStorage.getItem(opts.key));
  const set = (px: number) => {
    const v = Math.round(Math.max(opts.min, Math.min(opts.max, px)));
    grid.style.setProperty(prop, `${v}px`);
    return v;
  };
  let size = set(Number.isFinite(stored) && stored > 0 ? stored : opts.initial);
  handle.addEventListener("pointerdown", (e) => {
    e.preventDefault();
    handle.setPointerCapture(e.pointerId);
    const start = axis === "x" ? e.clientX : e.clientY;
    const from = size;
    handle.classList.add("dragging");
    const move = (m: PointerEvent) => {
      const d = (axis === "x" ? m.clientX : m.clientY) - start;
      size = set(from + (opts.invert ? -d : d));
      window.dispatchEvent(new Event("resize"));
    };
    const up = () => {
      handle.classList.remove("dragging");
      handle.removeEventListener("pointermove", move);
      handle.removeEventListener("pointerup", up);
      localStorage.setItem(opts.key, String(size));
    };
    handle.addEventListener("pointermove", move);
    handle.addEventListener("pointerup", up);
  });
  handle.ondblclick = () => {
    size = set(opts.initial);
    localStorage.removeItem(opts.key);
  };
  return handle;
}
