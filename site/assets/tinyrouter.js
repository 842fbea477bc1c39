/* TinyRouter: small reading aids over Material's tables (the pages read without them too).
 * - In a table that stacks on a phone (.tr-stack), each cell is labelled with its column.
 * - A table or a code block wider than its box gets a line above it saying that it scrolls
 *   sideways, whenever it is drawn (a search's results too). */
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
  // A code block scrolls in its <code>; its line goes above the block's .highlight wrapper.
  function hint(element) {
    var code = element.tagName === "CODE";
    var box = code ? element : (element.closest(".md-typeset__scrollwrap") || element);
    var holder = (code && element.closest(".highlight")) || box;
    var before = holder.previousElementSibling;
    var has = before !== null && before.classList.contains("tr-scroll-hint");
    var scrolls = box.scrollWidth > box.clientWidth + 1;
    if (scrolls && !has) {
      var note = document.createElement("p");
      note.className = "tr-scroll-hint";
      note.textContent = code ? "This code scrolls sideways \u2192"
                              : "This table scrolls sideways for more columns \u2192";
      holder.parentNode.insertBefore(note, holder);
    } else if (!scrolls && has) {
      before.remove();
    }
    // an attribute, not a class: Material styles only tables without a class
    box.toggleAttribute("data-tr-scrolls", scrolls);
  }

  function boxes() {
    return document.querySelectorAll(".md-typeset table:not([class]), .md-typeset pre > code");
  }

  var timer = null;
  function later(wait) {
    clearTimeout(timer);
    timer = setTimeout(function () { boxes().forEach(hint); }, wait);
  }

  function run() {
    document.querySelectorAll(".md-typeset .tr-stack table").forEach(label);
    boxes().forEach(hint);
    // whatever is added later (Material's wrapping, a table a search draws) is looked at too
    new MutationObserver(function () { later(50); })
      .observe(document.querySelector(".md-content") || document.body,
               {childList: true, subtree: true});
  }

  window.addEventListener("resize", function () { later(150); });
  if (document.readyState === "complete") { run(); } else { window.addEventListener("load", run); }
})();
