/* TinyRouter: small reading aids over Material's tables (the pages read without them too).
 * - In a table that stacks on a phone (.tr-stack), each cell is labelled with its column.
 * - A table wider than its box gets a line above it saying that it scrolls sideways. */
(function () {
  "use strict";

  function label(table) {
    var heads = Array.prototype.map.call(table.querySelectorAll("thead th"), function (th) {
      return th.textContent.trim();
    });
    table.querySelectorAll("tbody tr").forEach(function (row) {
      Array.prototype.forEach.call(row.children, function (cell, index) {
        if (heads[index]) { cell.setAttribute("data-label", heads[index]); }
        if (cell.textContent.trim() === "\u2014" || cell.textContent.trim() === "") {
          cell.classList.add("tr-empty");
        }
      });
    });
  }

  function hint(table) {
    var box = table.closest(".md-typeset__table") || table;
    var before = box.previousElementSibling;
    var has = before && before.classList.contains("tr-scroll-hint");
    var scrolls = table.scrollWidth > table.clientWidth + 1;
    if (scrolls && !has) {
      var note = document.createElement("p");
      note.className = "tr-scroll-hint";
      note.textContent = "This table scrolls sideways for more columns \u2192";
      box.parentNode.insertBefore(note, box);
      table.classList.add("tr-scrolls");
    } else if (!scrolls && has) {
      before.remove();
      table.classList.remove("tr-scrolls");
    }
  }

  function tables() {
    return document.querySelectorAll(".md-typeset table:not([class]), .md-typeset table.tr-scrolls");
  }

  function run() {
    document.querySelectorAll(".md-typeset .tr-stack table").forEach(label);
    tables().forEach(hint);
  }

  var timer = null;
  window.addEventListener("resize", function () {
    clearTimeout(timer);
    timer = setTimeout(function () { tables().forEach(hint); }, 150);
  });
  if (document.readyState === "complete") { run(); } else { window.addEventListener("load", run); }
})();
