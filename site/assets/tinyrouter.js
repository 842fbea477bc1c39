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

  // Material wraps each table in a box that scrolls sideways; without it, the table scrolls.
  function hint(table) {
    var box = table.closest(".md-typeset__scrollwrap") || table;
    var before = box.previousElementSibling;
    var has = before !== null && before.classList.contains("tr-scroll-hint");
    var scrolls = box.scrollWidth > box.clientWidth + 1;
    if (scrolls && !has) {
      var note = document.createElement("p");
      note.className = "tr-scroll-hint";
      note.textContent = "This table scrolls sideways for more columns \u2192";
      box.parentNode.insertBefore(note, box);
    } else if (!scrolls && has) {
      before.remove();
    }
    // an attribute, not a class: Material styles only tables without a class
    box.toggleAttribute("data-tr-scrolls", scrolls);
  }

  function tables() {
    return document.querySelectorAll(".md-typeset table:not([class])");
  }

  function run() {
    document.querySelectorAll(".md-typeset .tr-stack table").forEach(label);
    tables().forEach(hint);
    setTimeout(function () { tables().forEach(hint); }, 200);  // after Material's wrapping
  }

  var timer = null;
  window.addEventListener("resize", function () {
    clearTimeout(timer);
    timer = setTimeout(function () { tables().forEach(hint); }, 150);
  });
  if (document.readyState === "complete") { run(); } else { window.addEventListener("load", run); }
})();
