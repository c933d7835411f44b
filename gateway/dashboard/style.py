"""The page's stylesheet: plain, readable at 1280x800, and a print version without the forms."""

from __future__ import annotations

STYLE = """
:root { color-scheme: light; --ink: #1a1a1a; --muted: #555; --line: #d0d0d0; --accent: #0072B2; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.45 system-ui, sans-serif; color: var(--ink); background: #fff; }
header, main { max-width: 1200px; margin: 0 auto; padding: 12px 20px; }
header { display: flex; flex-wrap: wrap; gap: 12px; align-items: baseline; justify-content: space-between;
  border-bottom: 1px solid var(--line); }
h1 { font-size: 22px; margin: 0; } h2 { font-size: 18px; margin: 28px 0 8px; }
form.filters { display: flex; flex-wrap: wrap; gap: 10px; align-items: end; margin: 8px 0; }
.field { display: flex; flex-direction: column; gap: 2px; }
label { font-size: 13px; color: var(--muted); }
select, input, button { font: inherit; padding: 4px 6px; border: 1px solid #888; border-radius: 4px;
  background: #fff; color: var(--ink); }
button { background: var(--accent); color: #fff; border-color: var(--accent); cursor: pointer; }
button.plain { background: #fff; color: var(--ink); border-color: #888; }
:focus-visible { outline: 3px solid #E69F00; outline-offset: 2px; }
.basis, .note { color: var(--muted); font-size: 13px; }
dl.tiles { display: grid; grid-template-columns: repeat(4, 1fr); gap: 12px; margin: 12px 0; }
dl.tiles div { border: 1px solid var(--line); border-radius: 6px; padding: 10px 12px; }
dt { font-size: 13px; color: var(--muted); } dd { margin: 4px 0 0; font-size: 20px; font-weight: 600; }
table { border-collapse: collapse; width: 100%; margin: 8px 0; font-size: 14px; }
th, td { border-bottom: 1px solid var(--line); padding: 4px 8px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
thead th { background: #f2f2f2; } tfoot td { font-weight: 600; }
code { font-size: 13px; }
.estimated { font-style: italic; }
section { break-inside: avoid-page; }
a { color: #005a8c; }
@media print {
  form, .noprint { display: none !important; }
  body { font-size: 11pt; } header, main { max-width: none; padding: 0; }
  a { color: inherit; text-decoration: none; }
  dl.tiles div, thead th { border-color: #999; background: none; }
  svg { max-height: 9cm; }
}
"""
