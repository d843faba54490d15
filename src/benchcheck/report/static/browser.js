/* BenchCheck item browser. Data arrive as script chunks calling BC_DATA(key, payload): the one
   loading path that works from file://. Chunks are fetched when needed and evicted (LRU), so the
   page never holds the whole pool. No external code, no network. */
(function () {
  "use strict";
  var PAGE = 50, MAX_LISTS = 12, MAX_DETAILS = 6, LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
  var cache = {}, order = [], waiting = {}, index = null, scan = null;
  var $ = function (id) { return document.getElementById(id); };

  window.BC_DATA = function (key, data) {
    if (key === "index") { index = data; init(); return; }
    cache[key] = data; order.push(key);
    var w = waiting[key]; delete waiting[key];
    if (w) w.forEach(function (f) { f[0](data); });
    evict();
  };

  function evict() {
    var lists = order.filter(function (k) { return /\/l\d+$/.test(k); });
    var details = order.filter(function (k) { return /\/d\d+$/.test(k); });
    [[lists, MAX_LISTS], [details, MAX_DETAILS]].forEach(function (p) {
      while (p[0].length > p[1]) { var k = p[0].shift(); delete cache[k]; order.splice(order.indexOf(k), 1); }
    });
  }

  function load(key) {
    if (cache[key]) return Promise.resolve(cache[key]);
    return new Promise(function (resolve, reject) {
      if (waiting[key]) { waiting[key].push([resolve, reject]); return; }
      waiting[key] = [[resolve, reject]];
      var s = document.createElement("script");
      s.src = "data/" + key.split("/").map(encodeURIComponent).join("/") + ".js";
      s.onload = function () { s.remove(); };
      s.onerror = function () {
        s.remove(); var w = waiting[key] || []; delete waiting[key];
        w.forEach(function (f) { f[1](new Error("cannot load data/" + key + ".js")); });
      };
      document.head.appendChild(s);
    });
  }

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function fmt(x) { return (x === null || x === undefined) ? "-" : (typeof x === "number" ? x.toFixed(3) : String(x)); }

  function hashState() {
    var st = {};
    location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
      if (!kv) return; var i = kv.indexOf("=");
      st[decodeURIComponent(kv.slice(0, i))] = decodeURIComponent(kv.slice(i + 1).replace(/\+/g, " "));
    });
    return st;
  }
  function writeHash(st) {
    var parts = Object.keys(st).filter(function (k) { return st[k] !== "" && st[k] !== undefined; })
      .map(function (k) { return encodeURIComponent(k) + "=" + encodeURIComponent(st[k]); });
    history.replaceState(null, "", "#" + parts.join("&"));
  }
  function filters() {
    return { bench: $("f-bench").value, step: $("f-step").value, final: $("f-final").value, task: $("f-task").value,
             mlo: $("f-mlo").value, mhi: $("f-mhi").value, clo: $("f-clo").value, chi: $("f-chi").value,
             sort: $("f-sort").value, q: $("f-q").value.trim().toLowerCase() };
  }
  function benchByName(n) { return index.benches.filter(function (b) { return b.name === n; })[0]; }

  function fillTasks(bench) {
    var sel = $("f-task"), keep = sel.value;
    while (sel.options.length > 1) sel.remove(1);
    var b = benchByName(bench);
    (b ? b.tasks : []).forEach(function (t) { if (t) sel.appendChild(el("option", { value: t }, t)); });
    sel.value = keep;
  }

  function matcher(f) {
    var codes = index.codes, stepIx = f.step === "final" ? -1 : index.chain.indexOf(Number(f.step));
    var lo = f.mlo === "" ? -Infinity : Number(f.mlo), hi = f.mhi === "" ? Infinity : Number(f.mhi);
    var clo = f.clo === "" ? -Infinity : Number(f.clo), chi = f.chi === "" ? Infinity : Number(f.chi);
    return function (b, r) {
      if (f.final) {
        var code = stepIx < 0 ? r[2] : r[4].charAt(stepIx);
        if (code !== codes[f.final]) return false;
      }
      if (f.task && b.tasks[r[1]] !== f.task) return false;
      if (f.mlo !== "" || f.mhi !== "") {
        var m = stepIx < 0 ? r[6] : r[5][stepIx];
        if (m === null || m === undefined || m < lo || m > hi) return false;
      }
      if (f.clo !== "" || f.chi !== "") {
        var c = confOf(r, stepIx);
        if (c === null || c === undefined || c < clo || c > chi) return false;
      }
      if (f.q && r[0].toLowerCase().indexOf(f.q) < 0 && r[8].toLowerCase().indexOf(f.q) < 0) return false;
      return true;
    };
  }

  /* A list row's confidence: of its fate (final) or of one step's decision (null: no audit). */
  function confOf(r, stepIx) { return stepIx < 0 ? r[9] : (r[10] ? r[10][stepIx] : null); }
  function marginOf(r, stepIx) { return stepIx < 0 ? r[6] : r[5][stepIx]; }

  /* Sort keys "margin-asc", "confidence-desc", ...: missing values last either way. */
  function sortMatches(s) {
    var parts = s.f.sort.split("-"), desc = parts[1] === "desc";
    var stepIx = s.f.step === "final" ? -1 : index.chain.indexOf(Number(s.f.step));
    var key = parts[0] === "confidence" ? confOf : marginOf;
    s.matches.sort(function (x, y) {
      var a = key(x[1], stepIx), b = key(y[1], stepIx);
      var na = a === null || a === undefined, nb = b === null || b === undefined;
      if (na || nb) return na === nb ? 0 : (na ? 1 : -1);
      return desc ? b - a : a - b;
    });
    s.sorted = true;
  }

  function startScan() {
    var f = filters(), benches = f.bench ? [benchByName(f.bench)].filter(Boolean) : index.benches;
    var todo = [];
    benches.forEach(function (b) { b.lists.forEach(function (l) { todo.push([b, b.slug + "/" + l]); }); });
    var total = benches.reduce(function (a, b) { return a + b.n; }, 0);
    scan = { f: f, test: matcher(f), todo: todo, matches: [], scanned: 0, total: total, page: 0, busy: false };
    $("status").setAttribute("data-busy", "1");
    writeHash(Object.assign({}, f, { step: f.step === "final" ? "" : f.step }));
    return fill();
  }

  /* Read list chunks until the current page is full or nothing is left; keep only the matches. */
  function fill() {
    var s = scan;
    if (s.busy) return Promise.resolve();
    var need = s.f.sort ? Infinity : (s.page + 1) * PAGE;  // sorting needs every match first
    if (s.matches.length >= need || !s.todo.length) { render(); return Promise.resolve(); }
    s.busy = true;
    var next = s.todo.shift();
    return load(next[1]).then(function (rows) {
      rows.forEach(function (r) { if (s.test(next[0], r)) s.matches.push([next[0], r]); });
      s.scanned += rows.length; s.busy = false;
      if (scan === s) return fill();
    }, function (e) { s.busy = false; $("status").textContent = e.message; });
  }

  function render() {
    var s = scan, body = $("list").tBodies[0];
    if (s.f.sort && !s.todo.length && !s.sorted) sortMatches(s);
    body.textContent = "";
    var from = s.page * PAGE, rows = s.matches.slice(from, from + PAGE);
    // the margin and confidence shown are the chosen step's (the final decision's under "final")
    var stepIx = s.f.step === "final" ? -1 : index.chain.indexOf(Number(s.f.step));
    rows.forEach(function (m) {
      var b = m[0], r = m[1], tr = el("tr", { "data-id": r[0] });
      var a = el("a", { href: "#", title: r[0] }, r[0]);
      a.addEventListener("click", function (ev) { ev.preventDefault(); openItem(b, r); });
      var td = el("td"); td.appendChild(a); tr.appendChild(td);
      var fin = fateName(r[2]), at = r[2] === index.codes.removed ? " @" + r[3] : "";
      tr.appendChild(el("td", { "class": "fate-" + fin, title: fin.replace("_", " ") + (at ? " at step " + r[3] : "") },
                        fin.replace("_", " ") + at));
      tr.appendChild(el("td", { "class": "mono fates", title: fatesTitle(r[4]) }, r[4]));
      tr.appendChild(el("td", { "class": "margin" }, fmt(marginOf(r, stepIx))));
      tr.appendChild(el("td", { "class": "conf" }, fmt(confOf(r, stepIx))));
      tr.appendChild(el("td", { title: r[8] }, r[8]));
      body.appendChild(tr);
    });
    var done = !s.todo.length;
    $("status").textContent = (done ? s.matches.length : "at least " + s.matches.length) + " matching items" +
      (done ? "" : " (read " + s.scanned + " of " + s.total + " so far)");
    $("status").setAttribute("data-done", done ? "1" : "0");
    $("status").setAttribute("data-busy", "0");  // this page is filled (tests and benchmarks wait on it)
    var pager = $("pager"); pager.textContent = "";
    if (s.page > 0) { var p = el("button", {}, "previous"); p.onclick = function () { s.page--; render(); }; pager.appendChild(p); }
    pager.appendChild(el("span", {}, " page " + (s.page + 1) + " "));
    if (!done || s.matches.length > from + PAGE) {
      var n = el("button", { id: "next" }, "next"); n.onclick = function () { s.page++; fill(); }; pager.appendChild(n);
    }
  }

  function fateName(code) {
    return Object.keys(index.codes).filter(function (k) { return index.codes[k] === code; })[0] || code;
  }
  /* The fates cell's tooltip: one line per step of the chain, what its letter means. */
  function fatesTitle(codes) {
    return index.chain.map(function (s, i) {
      var name = fateName(codes.charAt(i));
      return "step " + s + ": " + ((index.meanings || {})[name] || name);
    }).join("\n");
  }

  function openItem(b, r) {
    var st = hashState(); st.item = r[0]; writeHash(st);
    return load(b.slug + "/d" + r[7]).then(function (recs) {
      var rec = recs.filter(function (x) { return x.id === r[0]; })[0];
      if (rec) {
        showDetail(b, rec);
        var d = $("detail");  // stacked (narrow window): the evidence is below the list, so go there
        if (d.getBoundingClientRect().top > window.innerHeight) d.scrollIntoView({ block: "start" });
      }
    }, function (e) { $("detail").textContent = e.message; });
  }

  function stepTable(rec, s) {
    var wrap = el("div", { "class": "step step-" + s.s });
    wrap.appendChild(el("h3", {}, "step " + s.s + ": " + s.f.replace("_", " ")));
    if (s.err) { wrap.appendChild(el("p", { "class": "err" }, s.err)); return wrap; }
    if (!s.lp) return wrap;
    var multi = Array.isArray(s.perms);
    var perms = multi ? s.perms : [s.perm || rec.o.map(function (_, i) { return i; })];
    var lps = multi ? s.lp : [s.lp], picks = multi ? s.picks : [s.pick], golds = multi ? s.gold_pos : [s.gold_pos];
    var margins = multi ? s.margins : [s.margin];
    var t = el("table", { "class": "num margins" }), head = el("tr");
    ["perm", "shown order", "gold at", "pick", "margin"].forEach(function (h) { head.appendChild(el("th", {}, h)); });
    for (var j = 0; j < rec.o.length; j++) head.appendChild(el("th", {}, "lp " + LETTERS[j]));
    t.appendChild(head);
    perms.forEach(function (perm, i) {
      var tr = el("tr");
      tr.appendChild(el("td", {}, i + 1));
      tr.appendChild(el("td", { "class": "mono" }, (perm || []).map(function (o) { return LETTERS[o]; }).join("")));
      tr.appendChild(el("td", {}, LETTERS[golds[i]] || "-"));
      tr.appendChild(el("td", { "class": picks[i] === golds[i] ? "hit" : "" }, LETTERS[picks[i]] || "-"));
      tr.appendChild(el("td", { "class": "margin" }, fmt(margins[i])));
      (lps[i] || []).forEach(function (v) { tr.appendChild(el("td", {}, fmt(v))); });
      t.appendChild(tr);
    });
    wrap.appendChild(t);
    var line = [];
    if (multi) line.push("mean margin " + fmt(s.mean_margin), "hits " + s.hits);
    line.push(s.removed ? "REMOVED (margin > log 2 = 0.693)" : "kept");
    if (s.model) line.push("model " + s.model);
    wrap.appendChild(el("p", {}, line.join(" · ")));
    if (s.conf !== undefined && s.conf !== null) {
      wrap.appendChild(el("p", { "class": "conf" }, "confidence " + fmt(s.conf) +
        " (the audit's probability that re-asking keeps this decision)"));
    }
    if (s.frames && rec.vid && index.frames) {
      var strip = el("div", { "class": "thumbs" });
      var shown = typeof s.frames === "number" ? Array.from({ length: s.frames }, function (_, i) { return i; }) : s.frames;
      shown.forEach(function (k) {
        strip.appendChild(el("img", { src: index.frames + "/" + encodeURIComponent(rec.vid) + "/frame_" + k + ".jpg",
                                      loading: "lazy", alt: "frame " + k, title: "grid position " + k }));
      });
      wrap.appendChild(strip);
    }
    return wrap;
  }

  // A step-0 gold: its letter, and for a near duplicate its text too (the two letters index two lists)
  function goldSide(gold, text, match) {
    return (LETTERS[gold] || gold) + (match === "near" && typeof text === "string" ? " \"" + text + "\"" : "");
  }

  function showDetail(b, rec) {
    var d = $("detail"); d.textContent = "";
    d.appendChild(el("h2", { id: "d-id" }, rec.id));
    d.appendChild(el("p", {}, b.name + (rec.task ? " · " + rec.task : "") + " · final: " + rec.final.replace("_", " ") +
      (rec.removed_at !== null && rec.removed_at !== undefined ? " at step " + rec.removed_at : "") +
      (rec.raw_vid ? " · video " + rec.raw_vid : "")));
    if (rec.step0) {
      var z = rec.step0, why = "removed at step 0 (duplicates): " + (z.verdict || "duplicate") +
        (z.kind ? " (" + z.kind + ")" : "") + (z.duplicate_of ? " duplicate of " + z.duplicate_of : "") +
        (z.duplicate_bench ? " in " + z.duplicate_bench : "") +
        (z.similarity !== undefined ? ", similarity " + fmt(z.similarity) : "") +
        (z.gold !== undefined ? ", gold " + goldSide(z.gold, z.gold_text, z.match) + " here, " +
          goldSide(z.duplicate_gold, z.duplicate_gold_text, z.match) + " there: at most one is right" : "") +
        "; no later step saw it";
      d.appendChild(el("p", { id: "d-step0", "class": "fate-removed" }, why));
    }
    if (rec.conf !== undefined && rec.conf !== null) d.appendChild(el("p", { id: "d-conf" }, "confidence of the final decision " + fmt(rec.conf)));
    d.appendChild(el("p", { id: "d-question", "class": "question" }, rec.no_text ? "(question text not available: report built without --items)" : rec.q));
    var ol = el("ol", { id: "d-options", type: "A" });
    rec.o.forEach(function (o, i) { ol.appendChild(el("li", { "class": i === rec.a ? "gold" : "" }, o + (i === rec.a ? "  ← gold" : ""))); });
    d.appendChild(ol);
    rec.steps.forEach(function (s) { d.appendChild(stepTable(rec, s)); });
    if (rec.probe) {  // the text-only probe beside the pyramid's evidence (docs/probe.md)
      var pr = rec.probe, pw = el("div", { id: "d-probe", "class": "step step-probe" });
      pw.appendChild(el("h3", {}, "text-only probe (out of fold, no video)"));
      var pt = el("table", { "class": "num" }), ph = el("tr"), pv = el("tr");
      (pr.p || []).forEach(function (v, j) {
        ph.appendChild(el("th", {}, "P(" + LETTERS[j] + ")"));
        pv.appendChild(el("td", { "class": j === rec.a ? "hit" : "" }, fmt(v)));
      });
      pt.appendChild(ph); pt.appendChild(pv); pw.appendChild(pt);
      pw.appendChild(el("p", {}, "probe picks " + pr.pick + " · P(gold) " + fmt(pr.pg)));
      if (pr.flag) {
        pw.appendChild(el("p", { id: "d-flag", "class": "fate-removed" }, "possible label error: " + pr.flag.agree +
          " of " + pr.flag.sources + " sources agree on " + pr.flag.option + " (gold " + LETTERS[rec.a] + "); " +
          pr.flag.evidence + " — a question for a person, not a removal"));
      }
      d.appendChild(pw);
    }
    if (rec.sweep) {
      d.appendChild(el("h3", {}, "sweep answers"));
      var t = el("table", { id: "d-sweep" }), h = el("tr");
      ["condition", "answer", "correct", "status"].forEach(function (x) { h.appendChild(el("th", {}, x)); });
      t.appendChild(h);
      rec.sweep.forEach(function (a) {
        var tr = el("tr");
        [a[0], a[1], a[2] === null ? "-" : (a[2] ? "yes" : "no"), a[3]].forEach(function (x) { tr.appendChild(el("td", {}, x)); });
        t.appendChild(tr);
      });
      d.appendChild(t);
    }
  }

  /* Open item ``id`` of ``bench`` (every benchmark when empty), reading list chunks in turn. */
  function findAndOpen(bench, id) {
    var benches = bench ? [benchByName(bench)].filter(Boolean) : index.benches, lists = [];
    benches.forEach(function (b) { b.lists.forEach(function (l) { lists.push([b, l]); }); });
    function next() {
      if (!lists.length) { $("detail").textContent = "item " + id + " not found in " + (bench || "any benchmark"); return Promise.resolve(); }
      var bl = lists.shift();
      return load(bl[0].slug + "/" + bl[1]).then(function (rows) {
        var r = rows.filter(function (x) { return x[0] === id; })[0];
        return r ? openItem(bl[0], r) : next();
      });
    }
    return next();
  }

  function init() {
    var sel = $("f-bench");
    index.benches.forEach(function (b) { sel.appendChild(el("option", { value: b.name }, b.name + " (" + b.n + ")")); });
    var st = hashState();
    sel.value = st.bench !== undefined && benchByName(st.bench) ? st.bench : "";  // default: every benchmark
    fillTasks(sel.value);
    if (st.step) $("f-step").value = st.step;
    ["final", "task", "mlo", "mhi", "clo", "chi", "sort", "q"].forEach(function (k) { if (st[k] !== undefined) $("f-" + k).value = st[k]; });
    sel.addEventListener("change", function () { fillTasks(sel.value); startScan(); });
    ["f-step", "f-final", "f-task", "f-sort"].forEach(function (id) { $(id).addEventListener("change", startScan); });
    $("f-go").addEventListener("click", startScan);
    $("f-q").addEventListener("keydown", function (e) { if (e.key === "Enter") startScan(); });
    startScan().then(function () { if (st.item) return findAndOpen(sel.value, st.item); });
  }
})();
