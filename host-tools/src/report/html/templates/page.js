"use strict";
// Sortable tables: a click on a column's header sorts the rows by its cells' data-v (numbers) or text.
document.querySelectorAll("table.sortable").forEach(function (table) {
  var head = table.tHead.rows[table.tHead.rows.length - 1];
  Array.prototype.forEach.call(head.cells, function (th, col) {
    th.addEventListener("click", function () {
      var desc = !th.classList.contains("desc");
      Array.prototype.forEach.call(head.cells, function (c) { c.classList.remove("asc", "desc"); });
      th.classList.add(desc ? "desc" : "asc");
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      var key = function (r) {
        var c = r.cells[col], v = c && c.getAttribute("data-v");
        return v === null ? (c ? c.textContent : "") : parseFloat(v);
      };
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        var o = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
        return desc ? -o : o;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});

// Attention rows: hovering, focusing or tapping a token (or a heatmap row) shows, in every head's
// panel, what that query position attends to, with the values.
(function () {
  var node = document.getElementById("data");
  if (!node) { return; }
  var data = JSON.parse(node.textContent);
  var toks = document.querySelectorAll("#tokens .tok");
  var fmt = function (x) { return x.toFixed(3); };
  var label = function (k) { return k + " " + JSON.stringify(data.labels[k]); };
  function select(q) {
    toks.forEach(function (t) { t.classList.toggle("on", Number(t.getAttribute("data-pos")) === q); });
    document.querySelectorAll("figure.head").forEach(function (fig) {
      var h = data.heads[fig.getAttribute("data-head")];
      if (!h) { return; }
      fig.querySelectorAll("svg.hm .sel").forEach(function (r) { r.setAttribute("y", q); });
      var ref = h.ref[q], cand = h.cand ? h.cand[q] : null;
      var keys = ref.map(function (_, k) { return k; });
      keys.sort(function (a, b) { return Math.max(ref[b], cand ? cand[b] : 0) - Math.max(ref[a], cand ? cand[a] : 0); });
      var lines = ["query " + label(q) + " attends to:"];
      keys.slice(0, 3).forEach(function (k) {
        var s = "  " + label(k) + "  " + fmt(ref[k]);
        if (cand) { s += " -> " + fmt(cand[k]) + " (" + (cand[k] >= ref[k] ? "+" : "") + fmt(cand[k] - ref[k]) + ")"; }
        lines.push(s);
      });
      fig.querySelector(".readout").textContent = lines.join("\n");
    });
  }
  toks.forEach(function (t) {
    var q = Number(t.getAttribute("data-pos"));
    ["mouseenter", "focus", "click"].forEach(function (ev) { t.addEventListener(ev, function () { select(q); }); });
  });
  document.querySelectorAll("svg.hm").forEach(function (svg) {
    svg.addEventListener("mousemove", function (ev) {
      var box = svg.getBoundingClientRect();
      var q = Math.floor((ev.clientY - box.top) / box.height * data.labels.length);
      if (q >= 0 && q < data.labels.length) { select(q); }
    });
  });
  if (data.labels.length > 0) { select(data.labels.length - 1); }
}());
