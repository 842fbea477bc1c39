(function () {
  // The Miners page's search: every miner's record from miners.json, read when first asked.
  var input = document.getElementById("tr-miner-query");
  if (!input) { return; }
  var status = document.getElementById("tr-miner-status");
  var found = document.getElementById("tr-miner-found");
  var SHOWN = 20;
  var data = null;
  function text(tag, content) {
    var node = document.createElement(tag);
    node.textContent = content === null || content === undefined ? "–" : String(content);
    return node;
  }
  function number(value, places) {
    return typeof value === "number" ? value.toFixed(places) : "–";
  }
  function signed(value, places) {
    return typeof value === "number" ? (value >= 0 ? "+" : "") + value.toFixed(places) : "–";
  }
  function tested(v) {
    // the crown test's difference and its 95% interval, as the Evaluations page shows them
    if (!v.interval) { return "–"; }
    var interval = "[" + signed(v.interval[0], v.places) + ", " +
      signed(v.interval[1], v.places) + "]";
    return typeof v.difference === "number" ?
      signed(v.difference, v.places) + " " + interval : interval;
  }
  function verdicts(miner) {
    var table = document.createElement("table");
    var head = document.createElement("tr");
    ["When (UTC)", "Gen", "PR", "Outcome", "Composite", "Δ to king",
     "Crown test difference [95% interval]", "Why"].forEach(
      function (name) { head.appendChild(text("th", name)); });
    table.appendChild(head);
    miner.verdicts.forEach(function (v) {
      var row = document.createElement("tr");
      [(v.when || "").replace("T", " ").replace("Z", ""), v.generation,
       v.pr === null ? null : "#" + v.pr, v.outcome, number(v.composite, v.places),
       signed(v.delta, v.places), tested(v), v.why].forEach(
        function (value) { row.appendChild(text("td", value)); });
      table.appendChild(row);
    });
    return table;
  }
  function entry(miner) {
    var box = document.createElement("div");
    var title = document.createElement("h3");
    if (miner.page) {
      var link = text("a", miner.name);
      link.href = input.dataset.root + miner.page;
      title.appendChild(link);
    } else {
      title.textContent = miner.name;
    }
    box.appendChild(title);
    box.appendChild(text("p", miner.attempts + " attempt(s) · " + miner.evaluated +
      " evaluated · " + miner.crowns + " crown(s)"));
    if (miner.verdicts.length) { box.appendChild(verdicts(miner)); }
    return box;
  }
  function show() {
    var query = input.value.trim().replace(/^@/, "").toLowerCase();
    found.textContent = "";
    if (!query) { status.textContent = ""; return; }
    var matches = data.miners.filter(function (m) { return m.id.indexOf(query) !== -1; });
    matches.sort(function (a, b) {
      return (b.id === query) - (a.id === query) || (a.id < b.id ? -1 : 1);
    });
    status.textContent = matches.length + " miner(s) match" +
      (matches.length > SHOWN ? "; the first " + SHOWN + " are shown" : "");
    matches.slice(0, SHOWN).forEach(function (m) { found.appendChild(entry(m)); });
  }
  function search() {
    if (data) { show(); return; }
    status.textContent = "Loading the miners…";
    fetch(input.dataset.source).then(function (response) { return response.json(); })
      .then(function (loaded) { data = loaded; show(); })
      .catch(function () { status.textContent = "The miners could not be loaded; try the downloads."; });
  }
  input.addEventListener("input", search);
  var wanted = new URLSearchParams(location.search).get("miner");
  if (wanted) { input.value = wanted; search(); }
})();
