// kernelgate performance history: draws the embedded data as SVG. Plain ES2019, no libraries,
// nothing fetched. Every text that comes from the data (kernel paths, commit subjects, names) is
// inserted with textContent / createTextNode / setAttribute only: it comes from pull requests.
(function () {
  'use strict';

  var SVG_NS = 'http://www.w3.org/2000/svg';
  // Okabe-Ito, vermillion kept for alerts (incorrect points, drift).
  var KERNEL_COLOURS = ['#0072B2', '#009E73', '#CC79A7', '#E69F00', '#56B4E9', '#A08C00', '#332288', '#882255'];
  var REFERENCE_COLOURS = ['#000000', '#6E6E6E', '#9A9A9A'];
  var HARDWARE_COLOURS = ['#0072B2', '#E69F00', '#009E73', '#CC79A7', '#56B4E9', '#000000'];
  var ALERT = '#D55E00';
  var SHAPES = ['circle', 'square', 'triangle', 'diamond', 'down', 'cross'];

  // ---------------------------------------------------------------- small helpers

  function arr(v) { return Array.isArray(v) ? v : []; }
  function str(v) { return v === null || v === undefined ? '' : String(v); }
  function num(v) { return typeof v === 'number' && isFinite(v) ? v : null; }
  function pos(v) { var n = num(v); return n !== null && n > 0 ? n : null; }

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    setAttrs(e, attrs);
    if (text !== undefined && text !== null) e.appendChild(document.createTextNode(String(text)));
    return e;
  }

  function svg(tag, attrs, text) {
    var e = document.createElementNS(SVG_NS, tag);
    setAttrs(e, attrs);
    if (text !== undefined && text !== null) e.appendChild(document.createTextNode(String(text)));
    return e;
  }

  function setAttrs(e, attrs) {
    if (!attrs) return;
    Object.keys(attrs).forEach(function (k) {
      var v = attrs[k];
      if (v === null || v === undefined || v === false) return;
      e.setAttribute(k, String(v));
    });
  }

  function add(parent) {
    for (var i = 1; i < arguments.length; i++) {
      var c = arguments[i];
      if (c === null || c === undefined) continue;
      parent.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
    }
    return parent;
  }

  // A path as text with break opportunities after its slashes (no markup from the data).
  function pathNode(tag, cls, path) {
    var e = el(tag, { class: cls });
    str(path).split('/').forEach(function (part, i, all) {
      e.appendChild(document.createTextNode(part + (i < all.length - 1 ? '/' : '')));
      if (i < all.length - 1) e.appendChild(document.createElement('wbr'));
    });
    return e;
  }

  function r2(v) { return Math.round(v * 100) / 100; }

  function shortSha(s) { return str(s).slice(0, 7); }

  function fmtMs(v) {
    v = num(v);
    if (v === null) return '\u2014';
    var a = Math.abs(v);
    if (a >= 1000) return v.toFixed(0);
    if (a >= 100) return v.toFixed(1);
    if (a === 0) return '0';
    return v.toPrecision(3);
  }

  function fmtInterval(lo, hi) {
    if (num(lo) === null || num(hi) === null) return '\u2014';
    return fmtMs(lo) + ' \u2013 ' + fmtMs(hi);
  }

  function fmtSpeedup(v) {
    v = num(v);
    if (v === null) return '\u2014';
    return (v >= 100 ? v.toFixed(0) : v.toFixed(2)) + '\u00d7';
  }

  function fmtPct(v) {
    v = num(v);
    if (v === null) return '\u2014';
    return (v > 0 ? '+' : '') + v.toFixed(1) + '%';
  }

  function fmtShare(v) {
    v = num(v);
    if (v === null) return '\u2014';
    return Math.round(v * 100) + '%';
  }

  // A point's efficiency as the generator worded it: {short: `77%`, label, detail}; null when
  // the record has none (references, host rows, older records).
  function efficiencyOf(pt) {
    var e = pt && pt.efficiency;
    if (!e || typeof e !== 'object' || num(e.pct) === null) return null;
    return {
      pct: e.pct,
      short: Math.round(e.pct) + '%',
      label: str(e.label) || Math.round(e.pct) + '% of the limit',
      detail: str(e.detail)
    };
  }

  // `2026-11-01T10:00:00Z` -> `2026-11-01 10:00 UTC`; anything else is shown as it is.
  function fmtDate(s) {
    s = str(s);
    var m = /^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2})(?::\d{2}(?:\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$/.exec(s);
    if (!m) return s || '\u2014';
    var zone = m[3] === undefined ? '' : m[3] === 'Z' ? ' UTC' : ' ' + m[3];
    return m[1] + ' ' + m[2] + zone;
  }

  // Mirrors the Rust side's `slug`: `level1/19_ReLU.py` -> `level1-19_ReLU`.
  function slugOf(problem) {
    var stem = str(problem).replace(/\.py$/, '');
    var out = '';
    for (var i = 0; i < stem.length; i++) {
      var c = stem.charAt(i);
      if (c === '/') out += '-';
      else if (/[A-Za-z0-9_.-]/.test(c)) out += c;
      else out += '_';
    }
    return out;
  }

  function log10(v) { return Math.log(v) / Math.LN10; }

  // A link from the data is used only when it is a web address (never `javascript:` or a data
  // URL: the data holds text from pull requests).
  function webUrl(u) {
    u = str(u);
    return /^https?:\/\/[^\s"<>]+$/i.test(u) ? u : null;
  }

  // `2026-11-01T10:00:00Z` -> `2026-11-01`; null when it is not a date.
  function dayOf(s) {
    var m = /^(\d{4}-\d{2}-\d{2})/.exec(str(s));
    return m ? m[1] : null;
  }

  // A child wrapped in a link to `url` (a commit's page unless `cls` says otherwise), or the
  // child itself where there is none.
  function linked(url, child, ns, cls) {
    var href = webUrl(url);
    if (!href) return child;
    var attrs = { href: href, class: cls || 'kg-commit-link', target: '_blank', rel: 'noopener' };
    var a = ns ? svg('a', attrs) : el('a', attrs);
    a.appendChild(child);
    return a;
  }

  // ---------------------------------------------------------------- data model

  function model(data) {
    var commits = arr(data.commits).filter(function (c) { return c && typeof c === 'object'; });
    var byIndex = {};
    var bySha = {};
    commits.forEach(function (c, i) {
      var idx = num(c.index) === null ? i : c.index;
      byIndex[idx] = c;
      if (c.sha) bySha[str(c.sha)] = c;
    });
    var problems = arr(data.problems).filter(function (p) { return p && typeof p === 'object'; });
    var hardware = arr(data.hardware).map(str);
    // Hardware keys only the series name are kept too, in order of appearance.
    problems.forEach(function (p) {
      arr(p.series).forEach(function (s) {
        var hw = str(s && s.hardware);
        if (hardware.indexOf(hw) < 0) hardware.push(hw);
      });
    });
    arr(data.fast_p).forEach(function (f) {
      var hw = str(f && f.hardware);
      if (f && hardware.indexOf(hw) < 0) hardware.push(hw);
    });
    var maxIndex = commits.length - 1;
    problems.forEach(function (p) {
      arr(p.series).forEach(function (s) {
        arr(s && s.points).forEach(function (pt) {
          if (pt && num(pt.index) !== null && pt.index > maxIndex) maxIndex = pt.index;
        });
      });
    });
    var threshold = num(data.threshold_pct);
    return {
      repo: str(data.repo),
      repoUrl: webUrl(data.repo_url),
      // The policy's regression threshold (percent); no band without one.
      threshold: threshold !== null && threshold > 0 ? threshold : null,
      generatedAt: str(data.generated_at),
      commits: commits,
      byIndex: byIndex,
      bySha: bySha,
      hardware: hardware,
      problems: problems,
      drift: arr(data.drift).filter(function (d) { return d && typeof d === 'object'; }),
      fastest: arr(data.fastest).filter(function (f) { return f && typeof f === 'object'; }),
      fastP: arr(data.fast_p).filter(function (f) { return f && typeof f === 'object'; }),
      maxIndex: maxIndex
    };
  }

  function commitAt(m, index, sha) {
    return (num(index) !== null && m.byIndex[index]) || (sha && m.bySha[str(sha)]) || null;
  }

  function shaAt(m, index) {
    var c = m.byIndex[index];
    return c ? shortSha(c.sha) : '#' + index;
  }

  function commitUrl(m, index, sha) {
    var c = commitAt(m, index, sha);
    return c ? webUrl(c.url) : null;
  }

  // The pull request the commit came from, as a link beside its sha (none when the subject
  // names none).
  function pullRequestLink(commit) {
    var n = commit ? num(commit.pull_request) : null;
    if (n === null) return null;
    var label = el('span', { class: 'kg-pr' }, '#' + n);
    return linked(commit.pull_request_url, label, false, 'kg-pr-link');
  }

  function problemSlug(m, problem) {
    for (var i = 0; i < m.problems.length; i++) {
      if (str(m.problems[i].problem) === str(problem)) return str(m.problems[i].slug) || slugOf(problem);
    }
    return slugOf(problem);
  }

  // The drift's commit index: its own, else the commit with its sha.
  function driftIndex(m, d) {
    if (num(d.index) !== null) return d.index;
    var c = d.sha ? m.bySha[str(d.sha)] : null;
    return c && num(c.index) !== null ? c.index : null;
  }

  // ---------------------------------------------------------------- tooltip

  var tooltip = null;
  var active = null;

  function tooltipEl() {
    if (!tooltip) {
      tooltip = el('div', { id: 'kg-tooltip', role: 'tooltip', hidden: 'hidden' });
      document.body.appendChild(tooltip);
    }
    return tooltip;
  }

  // rows: [[label, value, bad?]]
  function showTooltip(target, title, subject, rows) {
    var tt = tooltipEl();
    while (tt.firstChild) tt.removeChild(tt.firstChild);
    add(tt, el('div', { class: 'kg-tt-title' }, title));
    if (subject) add(tt, el('div', { class: 'kg-tt-subject' }, subject));
    var table = el('table');
    rows.forEach(function (r) {
      var tr = el('tr');
      add(tr, el('th', null, r[0]), el('td', r[2] ? { class: 'kg-bad' } : null, r[1]));
      table.appendChild(tr);
    });
    tt.appendChild(table);
    tt.removeAttribute('hidden');
    if (active) active.classList.remove('kg-active');
    active = target;
    target.classList.add('kg-active');

    var box = target.getBoundingClientRect();
    var sx = window.pageXOffset || document.documentElement.scrollLeft;
    var sy = window.pageYOffset || document.documentElement.scrollTop;
    var w = tt.offsetWidth;
    var h = tt.offsetHeight;
    var vw = document.documentElement.clientWidth;
    var left = box.right + 12;
    if (left + w > vw - 8) left = box.left - 12 - w;
    if (left < 8) left = 8;
    var top = box.top + box.height / 2 - h / 2;
    if (top < 8) top = 8;
    tt.style.left = Math.round(left + sx) + 'px';
    tt.style.top = Math.round(top + sy) + 'px';
  }

  function hideTooltip() {
    if (tooltip) tooltip.setAttribute('hidden', 'hidden');
    if (active) active.classList.remove('kg-active');
    active = null;
  }

  // Hover and focus on any element with an entry in `info` shows its tooltip.
  function bindTooltips(root, info) {
    function find(e) {
      var t = e.target;
      while (t && t !== root) {
        if (info.has(t)) return t;
        t = t.parentNode;
      }
      return null;
    }
    function show(e) {
      var t = find(e);
      if (t) {
        var i = info.get(t);
        showTooltip(t, i.title, i.subject, i.rows);
      }
    }
    root.addEventListener('mouseover', show);
    root.addEventListener('focusin', show);
    root.addEventListener('mouseout', function (e) { if (find(e)) hideTooltip(); });
    root.addEventListener('focusout', hideTooltip);
  }

  // ---------------------------------------------------------------- axes

  // Ordinal x ticks: every `step`-th commit so that labels stay `minGap` px apart.
  function ordinalTicks(lo, hi, pxPerStep, minGap) {
    var steps = [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 5000, 10000];
    var step = steps[steps.length - 1];
    for (var i = 0; i < steps.length; i++) {
      if (steps[i] * pxPerStep >= minGap) { step = steps[i]; break; }
    }
    var ticks = [];
    var first = Math.ceil(lo / step) * step;
    for (var t = first; t <= hi; t += step) ticks.push(t);
    return ticks;
  }

  // Date ticks on the commit axis: the first commit of each day in [lo, hi], thinned so that
  // labels stay `minGap` px apart. Without dates, every `step`-th commit by its short id.
  function dateTicks(m, lo, hi, X, minGap) {
    var ticks = [];
    var lastDay = null, lastX = -Infinity;
    for (var i = Math.max(0, Math.ceil(lo)); i <= hi; i++) {
      var c = m.byIndex[i];
      var day = c ? dayOf(c.date) : null;
      if (day === null || day === lastDay) continue;
      lastDay = day;
      if (X(i) - lastX < minGap) continue;
      lastX = X(i);
      ticks.push({ index: i, label: day, date: true });
    }
    if (ticks.length > 0) return ticks;
    var pxPerStep = hi > lo ? (X(hi) - X(lo)) / (hi - lo) : minGap;
    return ordinalTicks(lo, hi, pxPerStep, minGap).map(function (i) {
      return { index: i, label: shaAt(m, i), date: false };
    });
  }

  // The commit axis's tick marks and labels under `bottom`.
  function commitAxis(g, m, ticks, X, bottom) {
    ticks.forEach(function (t) {
      var x = r2(X(t.index));
      add(g, svg('line', { class: 'kg-axis', x1: x, x2: x, y1: bottom, y2: bottom + 4 }));
      add(g, svg('text', {
        class: 'kg-tick-label ' + (t.date ? 'kg-date-label' : 'kg-sha-label'), x: x, y: bottom + 10,
        'text-anchor': 'end', transform: 'rotate(-40 ' + x + ' ' + (bottom + 10) + ')',
        'data-index': t.index, 'data-date': t.date ? t.label : null
      }, t.label));
    });
  }

  // Log ticks for [lo, hi] (ms, > 0) on an axis of `pxPerDecade`: gridlines at every 1..9 x 10^k
  // (decades stronger); labels picked by niceness (decades, then 2 and 5, then the other digits,
  // then halves and finer steps) while they stay `minPx` apart, until there are enough of them.
  function logTicks(lo, hi, pxPerDecade, minPx) {
    var kLo = Math.floor(log10(lo)) - 1;
    var kHi = Math.ceil(log10(hi)) + 1;
    var minor = [];
    for (var k = kLo; k <= kHi; k++) {
      for (var d = 1; d <= 9; d++) {
        var v = d * Math.pow(10, k);
        if (v >= lo * 0.9999 && v <= hi * 1.0001) minor.push({ v: v, major: d === 1 });
      }
    }
    var levels = [[1], [2, 5], [3, 4, 6, 7, 8, 9], [1.5, 2.5, 3.5, 4.5, 1.2, 1.4, 1.6, 1.8],
      [1.1, 1.3, 1.7, 1.9, 2.2, 2.4, 2.6, 2.8, 3.25, 3.75, 4.25, 4.75, 5.5, 6.5, 7.5, 8.5, 9.5]];
    var picked = [];
    for (var l = 0; l < levels.length; l++) {
      if (picked.length >= 4) break;
      for (var kk = kLo; kk <= kHi; kk++) {
        for (var j = 0; j < levels[l].length; j++) {
          var lv = Number((levels[l][j] * Math.pow(10, kk)).toPrecision(6));
          if (lv < lo * 0.9999 || lv > hi * 1.0001) continue;
          var at = log10(lv) * pxPerDecade;
          var clear = picked.every(function (q) { return Math.abs(log10(q) * pxPerDecade - at) >= minPx; });
          if (clear) picked.push(lv);
        }
      }
    }
    picked.sort(function (a, b) { return a - b; });
    return { minor: minor, labels: picked };
  }

  function fmtTick(v) {
    var t = Number(v.toPrecision(3));
    if (t >= 1e4 || t < 1e-4) return t.toExponential(0).replace('e+', 'e');
    return String(t);
  }

  // ---------------------------------------------------------------- markers

  function shapePath(shape, x, y, r) {
    var s;
    switch (shape) {
      case 'square':
        s = r * 0.88;
        return 'M' + r2(x - s) + ' ' + r2(y - s) + 'h' + r2(2 * s) + 'v' + r2(2 * s) + 'h' + r2(-2 * s) + 'Z';
      case 'triangle':
        s = r * 1.2;
        return 'M' + r2(x) + ' ' + r2(y - s) + 'L' + r2(x + s * 0.95) + ' ' + r2(y + s * 0.65) +
          'L' + r2(x - s * 0.95) + ' ' + r2(y + s * 0.65) + 'Z';
      case 'down':
        s = r * 1.2;
        return 'M' + r2(x) + ' ' + r2(y + s) + 'L' + r2(x + s * 0.95) + ' ' + r2(y - s * 0.65) +
          'L' + r2(x - s * 0.95) + ' ' + r2(y - s * 0.65) + 'Z';
      case 'diamond':
        s = r * 1.25;
        return 'M' + r2(x) + ' ' + r2(y - s) + 'L' + r2(x + s) + ' ' + r2(y) + 'L' + r2(x) + ' ' +
          r2(y + s) + 'L' + r2(x - s) + ' ' + r2(y) + 'Z';
      case 'cross':
        s = r * 0.45;
        var o = r * 1.1;
        return 'M' + r2(x - s) + ' ' + r2(y - o) + 'h' + r2(2 * s) + 'v' + r2(o - s) + 'h' + r2(o - s) +
          'v' + r2(2 * s) + 'h' + r2(s - o) + 'v' + r2(o - s) + 'h' + r2(-2 * s) + 'v' + r2(s - o) +
          'h' + r2(s - o) + 'v' + r2(-2 * s) + 'h' + r2(o - s) + 'Z';
      default:
        return 'M' + r2(x - r) + ' ' + r2(y) + 'a' + r + ' ' + r + ' 0 1 0 ' + r2(2 * r) + ' 0a' + r + ' ' + r +
          ' 0 1 0 ' + r2(-2 * r) + ' 0Z';
    }
  }

  function xPath(x, y, r) {
    return 'M' + r2(x - r) + ' ' + r2(y - r) + 'L' + r2(x + r) + ' ' + r2(y + r) + 'M' + r2(x - r) + ' ' +
      r2(y + r) + 'L' + r2(x + r) + ' ' + r2(y - r);
  }

  // A legend swatch: a line (dashed for references) through the series' marker.
  function swatch(colour, shape, dashed) {
    var s = svg('svg', { width: 34, height: 14, viewBox: '0 0 34 14', 'aria-hidden': 'true' });
    add(s, svg('line', {
      x1: 1, y1: 7, x2: 33, y2: 7, stroke: colour, 'stroke-width': dashed ? 1.5 : 1.8,
      'stroke-dasharray': dashed ? '5 3' : null
    }));
    add(s, svg('path', { d: shapePath(shape, 17, 7, 4), fill: colour, stroke: '#fff', 'stroke-width': 1 }));
    return s;
  }

  // ---------------------------------------------------------------- page parts

  function header(m) {
    var h = el('header', { class: 'kg-header' });
    var left = el('div');
    add(left, el('h1', null, 'kernelgate \u2014 performance history'));
    var sub = el('div', { class: 'kg-sub' });
    var repo = el('span', { class: 'kg-repo' }, m.repo || m.repoUrl || 'unknown');
    add(sub, 'Repository ', linked(m.repoUrl, repo, false, 'kg-repo-link'));
    left.appendChild(sub);
    h.appendChild(left);

    var dl = el('dl', { class: 'kg-facts' });
    function fact(k, v) {
      add(dl, el('dt', null, k));
      var dd = el('dd');
      add(dd, v);
      dl.appendChild(dd);
    }
    var gen = el('time', { datetime: m.generatedAt || null }, fmtDate(m.generatedAt));
    fact('Generated', gen);
    fact('Commits', String(m.commits.length));
    fact('Problems', String(m.problems.length));
    var chips = el('span');
    if (m.hardware.length === 0) add(chips, '\u2014');
    m.hardware.forEach(function (hw) { add(chips, el('span', { class: 'kg-chip' }, hw)); });
    fact('Hardware', chips);
    if (m.threshold !== null) fact('Regression threshold', m.threshold + '%');
    h.appendChild(dl);
    return h;
  }

  function card(title, desc, id) {
    var c = el('section', { class: 'kg-card', id: id || null });
    add(c, el('h2', null, title));
    if (desc) add(c, el('p', { class: 'kg-desc' }, desc));
    return c;
  }

  function fastestTable(m) {
    var c = card('Fastest correct kernel per problem',
      'At the latest commit, per hardware: the fastest kernel that is correct, its median time with its interval, its speedup over eager PyTorch and, on a GPU, how close it comes to the device\u2019s limit.');
    var rows = m.fastest.slice().sort(function (a, b) {
      return str(a.problem).localeCompare(str(b.problem)) || str(a.hardware).localeCompare(str(b.hardware));
    });
    if (rows.length === 0) {
      add(c, el('p', { class: 'kg-empty' }, 'No correct kernel yet.'));
      return c;
    }
    var wrap = el('div', { class: 'kg-table-wrap' });
    var t = el('table', { class: 'kg-table kg-fastest' });
    var thead = el('thead');
    var hr = el('tr');
    // The efficiency column only where some row has one (GPU rows of `pr` reports).
    var withEfficiency = rows.some(function (f) { return efficiencyOf(f) !== null; });
    var cols = [['Problem', ''], ['Hardware', ''], ['Kernel', ''], ['Median (ms)', 'kg-num'], ['Interval (ms)', 'kg-num'],
      ['Speedup vs eager (\u00d7)', 'kg-num']];
    if (withEfficiency) cols.push(['Efficiency', 'kg-num']);
    cols.push(['Commit', '']);
    cols.forEach(function (h) {
      add(hr, el('th', { scope: 'col', class: h[1] || null }, h[0]));
    });
    thead.appendChild(hr);
    t.appendChild(thead);
    var tb = el('tbody');
    rows.forEach(function (f) {
      var tr = el('tr');
      var pc = el('td');
      var pa = pathNode('a', 'kg-problem-link', f.problem);
      pa.setAttribute('href', '#' + problemSlug(m, f.problem));
      add(pc, pa);
      tr.appendChild(pc);
      add(tr, el('td', { class: 'kg-hw' }, str(f.hardware)));
      add(tr, pathNode('td', 'kg-path', f.kernel));
      add(tr, el('td', { class: 'kg-num' }, fmtMs(f.median_ms)));
      add(tr, el('td', { class: 'kg-num kg-dim' }, fmtInterval(f.lo_ms, f.hi_ms)));
      var sp = num(f.speedup);
      add(tr, el('td', { class: 'kg-num' + (sp !== null && sp > 1 ? ' kg-faster' : sp !== null ? ' kg-slower' : '') },
        fmtSpeedup(f.speedup)));
      if (withEfficiency) {
        var eff = efficiencyOf(f);
        add(tr, el('td', { class: 'kg-num kg-efficiency', title: eff ? eff.detail : null }, eff ? eff.short : '\u2014'));
      }
      var cc = el('td');
      var commit = commitAt(m, null, f.sha);
      var title = str(f.sha) + (commit && commit.subject ? ' \u2014 ' + str(commit.subject) : '');
      add(cc, linked(commitUrl(m, null, f.sha), el('code', { title: title || null }, shortSha(f.sha) || '\u2014'), false));
      var fpr = pullRequestLink(commit);
      if (fpr) add(cc, ' ', fpr);
      tr.appendChild(cc);
      tb.appendChild(tr);
    });
    t.appendChild(tb);
    wrap.appendChild(t);
    c.appendChild(wrap);
    return c;
  }

  function driftList(m) {
    var c = card('Drift alerts', 'Sustained changes of a series\u2019 median time, at the commit where they begin.');
    if (m.drift.length === 0) {
      add(c, el('p', { class: 'kg-empty kg-no-drift' }, 'No drift detected.'));
      return c;
    }
    var ul = el('ul', { class: 'kg-drift-list' });
    m.drift.forEach(function (d) {
      var li = el('li', { class: 'kg-drift-item' });
      var head = el('div', { class: 'kg-drift-head' });
      var pct = num(d.change_pct);
      add(head, el('span', { class: 'kg-drift-pct' + (pct !== null && pct < 0 ? ' kg-improved' : '') }, fmtPct(d.change_pct)),
        ' ', el('a', { href: '#' + problemSlug(m, d.problem) }, str(d.problem)), ' on ', str(d.hardware));
      li.appendChild(head);
      add(li, pathNode('div', 'kg-path', d.series));
      var commit = commitAt(m, driftIndex(m, d), d.sha);
      var meta = el('div', { class: 'kg-meta' });
      add(meta, fmtMs(d.before_ms) + ' \u2192 ' + fmtMs(d.after_ms) + ' ms from commit ',
        linked(commitUrl(m, driftIndex(m, d), d.sha), el('code', { title: str(d.sha) || null }, shortSha(d.sha) || '\u2014'), false));
      var dpr = pullRequestLink(commit);
      if (dpr) add(meta, ' of ', dpr);
      if (commit && commit.date) add(meta, ' (' + fmtDate(commit.date) + ')');
      li.appendChild(meta);
      ul.appendChild(li);
    });
    c.appendChild(ul);
    return c;
  }

  function fastPChart(m) {
    var c = card('fast_p over commits',
      'fast_1: the share of problems whose fastest correct kernel beats the eager reference, at each commit.');
    var byHw = {};
    m.fastP.forEach(function (f) {
      var hw = str(f.hardware);
      (byHw[hw] = byHw[hw] || []).push(f);
    });
    var hws = m.hardware.filter(function (hw) { return byHw[hw]; });
    if (hws.length === 0) {
      add(c, el('p', { class: 'kg-empty' }, 'No fast_p data yet.'));
      return c;
    }
    // A hardware whose fast_1 never moved is said in one line, not drawn as a flat line.
    var flat = hws.filter(function (hw) {
      var values = byHw[hw].map(function (f) { return num(f.fast_1); }).filter(function (v) { return v !== null; });
      return values.every(function (v) { return v === values[0]; });
    });
    flat.forEach(function (hw) {
      var first = byHw[hw].filter(function (f) { return num(f.fast_1) !== null; })[0];
      add(c, el('p', { class: 'kg-note kg-fastp-flat', 'data-hardware': hw },
        hw + ': fast_1 has been ' + (first ? fmtShare(first.fast_1) : '\u2014') + ' at every one of its ' +
        byHw[hw].length + ' commit' + (byHw[hw].length === 1 ? '' : 's') + '.'));
    });
    hws = hws.filter(function (hw) { return flat.indexOf(hw) < 0; });
    if (hws.length === 0) return c;
    var W = 560, H = 250, ml = 48, mr = 14, mt = 12, mb = 70;
    var pw = W - ml - mr, ph = H - mt - mb;
    var maxI = Math.max(0, m.maxIndex);
    m.fastP.forEach(function (f) { if (num(f.index) !== null && f.index > maxI) maxI = f.index; });
    var x0 = -0.5, x1 = maxI + 0.5;
    function X(i) { return ml + (i - x0) / (x1 - x0) * pw; }
    function Y(v) { return mt + (1 - v) * ph; }
    var s = svg('svg', {
      class: 'kg-fastp', viewBox: '0 0 ' + W + ' ' + H, role: 'img', preserveAspectRatio: 'xMidYMid meet',
      'aria-label': 'fast_1 over commits per hardware'
    });
    add(s, svg('title', null, 'fast_1 over commits'));
    var grid = svg('g');
    [0, 0.25, 0.5, 0.75, 1].forEach(function (v) {
      add(grid, svg('line', { class: v === 0 ? 'kg-axis' : 'kg-grid-minor', x1: ml, x2: ml + pw, y1: r2(Y(v)), y2: r2(Y(v)) }));
      add(grid, svg('text', { class: 'kg-tick-label', x: ml - 6, y: r2(Y(v)) + 4, 'text-anchor': 'end' }, fmtShare(v)));
    });
    commitAxis(grid, m, dateTicks(m, 0, maxI, X, 26), X, mt + ph);
    add(grid, svg('text', { class: 'kg-axis-title', x: ml + pw / 2, y: H - 4, 'text-anchor': 'middle' }, 'commit date'));
    s.appendChild(grid);

    var info = new Map();
    hws.forEach(function (hw, hi) {
      var colour = HARDWARE_COLOURS[hi % HARDWARE_COLOURS.length];
      var shape = SHAPES[m.hardware.indexOf(hw) % SHAPES.length];
      var pts = byHw[hw].filter(function (f) { return num(f.index) !== null && num(f.fast_1) !== null; })
        .sort(function (a, b) { return a.index - b.index; });
      var g = svg('g', { class: 'kg-fastp-series', 'data-hardware': hw });
      add(g, svg('polyline', {
        class: 'kg-line', stroke: colour,
        points: pts.map(function (f) { return r2(X(f.index)) + ',' + r2(Y(f.fast_1)); }).join(' ')
      }));
      pts.forEach(function (f) {
        var sha = shortSha(f.sha) || shaAt(m, f.index);
        var p = svg('path', {
          class: 'kg-fastp-point', d: shapePath(shape, X(f.index), Y(f.fast_1), 3), fill: colour, stroke: '#fff',
          'stroke-width': 0.8
        });
        var commit = commitAt(m, f.index, f.sha);
        var rows = [['commit', sha], ['date', fmtDate(commit && commit.date)], ['fast_1', fmtShare(f.fast_1)],
          ['fast_0', fmtShare(f.fast_0)], ['problems', str(f.problems)]];
        add(p, svg('title', null, hw + ' \u00b7 ' + sha + ': fast_1 ' + fmtShare(f.fast_1) + ', fast_0 ' + fmtShare(f.fast_0)));
        var target = linked(commitUrl(m, f.index, f.sha), p, true);
        info.set(target, { title: hw, subject: commit ? str(commit.subject) : '', rows: rows });
        g.appendChild(target);
      });
      s.appendChild(g);
    });
    bindTooltips(s, info);
    var wrap = el('div', { class: 'kg-plot-wrap' });
    wrap.appendChild(s);
    c.appendChild(wrap);
    var legend = el('ul', { class: 'kg-legend' });
    hws.forEach(function (hw, hi) {
      var li = el('li');
      add(li, swatch(HARDWARE_COLOURS[hi % HARDWARE_COLOURS.length], SHAPES[m.hardware.indexOf(hw) % SHAPES.length], false),
        el('span', { class: 'kg-lhw' }, hw));
      legend.appendChild(li);
    });
    c.appendChild(legend);
    return c;
  }

  function toc(m) {
    var c = card('Problems', null);
    var drifted = {};
    m.drift.forEach(function (d) { drifted[str(d.problem)] = true; });
    var ul = el('ul', { class: 'kg-toc' });
    m.problems.forEach(function (p) {
      var li = el('li');
      add(li, el('a', {
        href: '#' + (str(p.slug) || slugOf(p.problem)), class: drifted[str(p.problem)] ? 'kg-has-drift' : null,
        title: drifted[str(p.problem)] ? 'drift detected' : null
      }, str(p.problem)));
      ul.appendChild(li);
    });
    c.appendChild(ul);
    return c;
  }

  // ---------------------------------------------------------------- per-problem plot

  function problemSection(m, p, counters) {
    var slug = str(p.slug) || slugOf(p.problem);
    var sec = el('section', { class: 'kg-card kg-problem', id: slug });
    var head = el('div', { class: 'kg-problem-head' });
    var h2 = el('h2');
    add(h2, str(p.problem) + ' ', el('a', { class: 'kg-anchor', href: '#' + slug, 'aria-label': 'link to this problem' }, '#'));
    head.appendChild(h2);
    sec.appendChild(head);

    var series = arr(p.series).filter(function (s) { return s && typeof s === 'object'; });
    // Colours per series name (kernels and references apart), shapes per hardware.
    var kernelNames = [], refNames = [];
    series.forEach(function (s) {
      var list = s.kind === 'reference' ? refNames : kernelNames;
      if (list.indexOf(str(s.name)) < 0) list.push(str(s.name));
    });
    function colourOf(s) {
      return s.kind === 'reference'
        ? REFERENCE_COLOURS[refNames.indexOf(str(s.name)) % REFERENCE_COLOURS.length]
        : KERNEL_COLOURS[kernelNames.indexOf(str(s.name)) % KERNEL_COLOURS.length];
    }
    function shapeOf(s) {
      var i = m.hardware.indexOf(str(s.hardware));
      return SHAPES[(i < 0 ? 0 : i) % SHAPES.length];
    }
    // Kernels first, then references; each by name, then hardware order.
    series.sort(function (a, b) {
      var ka = a.kind === 'reference' ? 1 : 0, kb = b.kind === 'reference' ? 1 : 0;
      return ka - kb || str(a.name).localeCompare(str(b.name)) ||
        m.hardware.indexOf(str(a.hardware)) - m.hardware.indexOf(str(b.hardware));
    });

    // One panel per hardware key, stacked in the one SVG and sharing the commit axis: each has
    // its own log time axis, so a GPU's microseconds and a CPU's milliseconds both stay legible.
    var drifts = m.drift.filter(function (d) { return str(d.problem) === str(p.problem); });
    var panelHw = [];
    series.forEach(function (ser) {
      if (panelHw.indexOf(str(ser.hardware)) < 0) panelHw.push(str(ser.hardware));
    });
    panelHw.sort(function (a, b) { return m.hardware.indexOf(a) - m.hardware.indexOf(b); });
    if (panelHw.length === 0) panelHw.push('');

    var iMin = Infinity, iMax = -Infinity, nPoints = 0;
    var panels = panelHw.map(function (hw) {
      return { hw: hw, lo: Infinity, hi: -Infinity, untimed: false };
    });
    function panelOf(hw) {
      var i = panelHw.indexOf(str(hw));
      return i < 0 ? null : panels[i];
    }
    series.forEach(function (ser) {
      var pn = panelOf(ser.hardware);
      arr(ser.points).forEach(function (pt) {
        if (!pt || num(pt.index) === null) return;
        nPoints++;
        iMin = Math.min(iMin, pt.index);
        iMax = Math.max(iMax, pt.index);
        var md = pos(pt.median_ms);
        if (md === null) { pn.untimed = true; return; }
        [md, pos(pt.lo_ms), pos(pt.hi_ms)].forEach(function (v) {
          if (v !== null) { pn.lo = Math.min(pn.lo, v); pn.hi = Math.max(pn.hi, v); }
        });
      });
    });
    drifts.forEach(function (d) {
      var di = driftIndex(m, d);
      if (di !== null && panelOf(d.hardware)) { iMin = Math.min(iMin, di); iMax = Math.max(iMax, di); }
    });
    if (!isFinite(iMin)) { iMin = 0; iMax = Math.max(0, m.maxIndex); }
    var x0 = iMin - 0.5, x1 = iMax + 0.5;
    if (x1 - x0 < 4) { var cx = (x0 + x1) / 2; x0 = cx - 2; x1 = cx + 2; }

    var W = 960, ml = 66, mr = 16, mt = 8, mb = 80;
    var headH = 24;   // the panel's title and drift labels
    var gap = 14;
    var plotH = panels.length > 1 ? 190 : 260;
    var pw = W - ml - mr;
    var yCursor = mt;
    panels.forEach(function (pn) {
      if (!isFinite(pn.lo)) { pn.lo = 0.01; pn.hi = 1; }
      var l0 = log10(pn.lo), l1 = log10(pn.hi);
      var minSpan = 0.3;
      if (l1 - l0 < minSpan) {
        var mid = (l0 + l1) / 2;
        l0 = mid - minSpan / 2;
        l1 = mid + minSpan / 2;
      } else {
        var pad = (l1 - l0) * 0.08;
        l0 -= pad;
        l1 += pad;
      }
      pn.l0 = l0;
      pn.l1 = l1;
      pn.band = pn.untimed ? 22 : 0;
      pn.top = yCursor + headH;
      pn.ph = plotH;
      pn.bottom = pn.top + pn.ph + pn.band;
      pn.yUntimed = pn.top + pn.ph + pn.band / 2 + 1;
      yCursor = pn.bottom + gap;
    });
    var plotBottom = panels[panels.length - 1].bottom;
    var H = plotBottom + mb;
    function X(i) { return ml + (i - x0) / (x1 - x0) * pw; }
    function Yp(pn, v) { return pn.top + (1 - (log10(v) - pn.l0) / (pn.l1 - pn.l0)) * pn.ph; }

    var s = svg('svg', {
      class: 'kg-plot', viewBox: '0 0 ' + W + ' ' + H, role: 'img', preserveAspectRatio: 'xMidYMid meet',
      'data-problem': str(p.problem),
      'aria-label': 'time per commit for ' + str(p.problem) + ', log scale'
    });
    add(s, svg('title', null, str(p.problem) + ': median time per commit (ms, log scale)'));

    // Grid and axes, per panel; commit ticks under the last panel, light guides through all.
    var grid = svg('g', { class: 'kg-axes' });
    var xt = dateTicks(m, iMin, iMax, X, 22);
    panels.forEach(function (pn) {
      add(grid, svg('text', { class: 'kg-panel-title', x: ml, y: pn.top - 8, 'data-hardware': pn.hw }, pn.hw));
      var ticks = logTicks(Math.pow(10, pn.l0), Math.pow(10, pn.l1), pn.ph / (pn.l1 - pn.l0), 20);
      ticks.minor.forEach(function (t) {
        var y = r2(Yp(pn, t.v));
        add(grid, svg('line', { class: t.major ? 'kg-grid-major' : 'kg-grid-minor', x1: ml, x2: ml + pw, y1: y, y2: y }));
      });
      ticks.labels.forEach(function (v) {
        var y = r2(Yp(pn, v));
        add(grid, svg('line', { class: 'kg-axis', x1: ml - 4, x2: ml, y1: y, y2: y }));
        add(grid, svg('text', { class: 'kg-tick-label', x: ml - 7, y: y + 4, 'text-anchor': 'end' }, fmtTick(v)));
      });
      xt.forEach(function (t) {
        var x = r2(X(t.index));
        add(grid, svg('line', { class: 'kg-grid-x', x1: x, x2: x, y1: pn.top, y2: pn.bottom }));
      });
      if (pn.untimed) {
        add(grid, svg('rect', { class: 'kg-untimed-band', x: ml, y: pn.top + pn.ph, width: pw, height: pn.band }));
        add(grid, svg('text', { class: 'kg-tick-label', x: ml - 7, y: pn.yUntimed + 4, 'text-anchor': 'end' }, 'not timed'));
      }
      add(grid, svg('line', { class: 'kg-axis', x1: ml, x2: ml, y1: pn.top, y2: pn.bottom }));
      add(grid, svg('line', { class: 'kg-axis', x1: ml, x2: ml + pw, y1: pn.bottom, y2: pn.bottom }));
    });
    commitAxis(grid, m, xt, X, plotBottom);
    var midY = r2((panels[0].top + plotBottom) / 2);
    add(grid, svg('text', {
      class: 'kg-axis-title', 'text-anchor': 'middle', x: 14, y: midY, transform: 'rotate(-90 14 ' + midY + ')'
    }, 'median time (ms, log scale)'));
    add(grid, svg('text', { class: 'kg-axis-title', x: ml + pw / 2, y: H - 4, 'text-anchor': 'middle' },
      'commit date (one step per commit)'));
    s.appendChild(grid);

    // Drift markers, under the series, in their hardware's panel.
    var driftG = svg('g', { class: 'kg-drifts' });
    drifts.forEach(function (d) {
      var di = driftIndex(m, d);
      var pn = panelOf(d.hardware);
      if (di === null || !pn) return;
      var x = r2(X(di));
      var line = svg('line', {
        class: 'kg-drift', x1: x, x2: x, y1: pn.top, y2: pn.bottom, 'data-series': str(d.series),
        'data-hardware': str(d.hardware), 'data-index': di
      });
      add(line, svg('title', null, 'drift ' + fmtPct(d.change_pct) + ' at ' + shortSha(d.sha) + ': ' + str(d.series) +
        ' \u00b7 ' + str(d.hardware) + ' (' + fmtMs(d.before_ms) + ' \u2192 ' + fmtMs(d.after_ms) + ' ms)'));
      driftG.appendChild(line);
      var right = X(di) > ml + pw - 90;
      add(driftG, svg('text', {
        class: 'kg-drift-label', x: right ? x - 4 : x + 4, y: pn.top - 8, 'text-anchor': right ? 'end' : 'start'
      }, 'drift ' + fmtPct(d.change_pct)));
    });
    s.appendChild(driftG);

    // Series.
    var info = new Map();
    var markers = 0;
    var legendItems = [];
    series.forEach(function (ser) {
      var pn = panelOf(ser.hardware);
      var colour = colourOf(ser);
      var shape = shapeOf(ser);
      var isRef = ser.kind === 'reference';
      var label = str(ser.name) + ' \u00b7 ' + str(ser.hardware);
      function Y(v) { return Yp(pn, v); }
      var g = svg('g', {
        class: 'kg-series' + (isRef ? ' kg-series-ref' : ''), 'data-name': str(ser.name),
        'data-hardware': str(ser.hardware), 'data-kind': str(ser.kind)
      });
      var pts = arr(ser.points).filter(function (pt) { return pt && num(pt.index) !== null; })
        .slice().sort(function (a, b) { return a.index - b.index; });
      var timed = pts.filter(function (pt) { return pos(pt.median_ms) !== null; });
      // The regression threshold as a band around each commit's predecessor: a kernel above
      // it is more than the threshold slower than the commit before (what `pr` calls a
      // regression when the interval agrees). Kernels only: references are not judged.
      var previous = {};
      if (!isRef && m.threshold !== null && timed.length > 1) {
        var k = 1 + m.threshold / 100;
        var d = '';
        var steps = 0;
        for (var ti = 1; ti < timed.length; ti++) {
          var prev = timed[ti - 1].median_ms;
          previous[timed[ti].index] = prev;
          var bx0 = r2(X(timed[ti].index - 0.5)), bx1 = r2(X(timed[ti].index + 0.5));
          var by0 = r2(Y(prev * k)), by1 = r2(Y(prev / k));
          d += 'M' + bx0 + ' ' + by0 + 'H' + bx1 + 'V' + by1 + 'H' + bx0 + 'Z';
          steps++;
        }
        add(g, svg('path', {
          class: 'kg-threshold-band', fill: colour, d: d, 'data-threshold-pct': m.threshold, 'data-steps': steps
        }));
      }
      if (timed.length > 1) {
        add(g, svg('polyline', {
          class: 'kg-line' + (isRef ? ' kg-ref' : ''), stroke: colour,
          points: timed.map(function (pt) { return r2(X(pt.index)) + ',' + r2(Y(pt.median_ms)); }).join(' ')
        }));
      }
      // Whiskers under the markers.
      timed.forEach(function (pt) {
        var plo = pos(pt.lo_ms), phi = pos(pt.hi_ms);
        if (plo === null || phi === null) return;
        var x = r2(X(pt.index));
        var ya = r2(Y(plo)), yb = r2(Y(phi));
        add(g, svg('path', {
          class: 'kg-whisker', stroke: pt.correct === false ? ALERT : colour,
          d: 'M' + x + ' ' + ya + 'V' + yb + 'M' + r2(x - 2.5) + ' ' + ya + 'h5M' + r2(x - 2.5) + ' ' + yb + 'h5'
        }));
      });
      pts.forEach(function (pt) {
        var md = pos(pt.median_ms);
        var incorrect = pt.correct === false;
        var x = X(pt.index);
        var cls = 'kg-point' + (incorrect ? ' kg-incorrect' : '') + (md === null ? ' kg-untimed' : '');
        var mark = svg('path', {
          class: cls,
          d: md === null ? xPath(x, pn.yUntimed, 4) : shapePath(shape, x, Y(md), incorrect ? 5 : 3.6),
          fill: md === null || incorrect ? null : colour,
          stroke: md === null || incorrect ? null : '#ffffff',
          'data-index': pt.index,
          'data-correct': incorrect ? 'false' : 'true'
        });
        var commit = commitAt(m, pt.index, pt.sha);
        var sha = shortSha(pt.sha) || (commit ? shortSha(commit.sha) : '#' + pt.index);
        var date = pt.date || (commit && commit.date);
        var verdict = pt.verdict === null || pt.verdict === undefined ? '\u2014' : str(pt.verdict);
        var eff = efficiencyOf(pt);
        var prevMs = previous[pt.index];
        var change = md !== null && prevMs !== undefined ? (md / prevMs - 1) * 100 : null;
        var beyond = change !== null && m.threshold !== null && md > prevMs * (1 + m.threshold / 100);
        if (beyond) mark.setAttribute('data-beyond-threshold', 'slower');
        if (eff) mark.setAttribute('data-efficiency-pct', String(r2(eff.pct)));
        var rows = [
          ['commit', sha + '  (#' + pt.index + ')'],
          ['pull request', commit && num(commit.pull_request) !== null ? '#' + commit.pull_request : '\u2014'],
          ['date', fmtDate(date)],
          ['median', md === null ? 'not timed' : fmtMs(md) + ' ms', md === null],
          ['interval', fmtInterval(pt.lo_ms, pt.hi_ms) + (num(pt.lo_ms) !== null && num(pt.hi_ms) !== null ? ' ms' : '')],
          ['verdict', verdict, verdict === 'fail'],
          ['correct', incorrect ? 'no' : 'yes', incorrect],
          ['speedup', fmtSpeedup(pt.speedup)]
        ];
        if (change !== null) {
          rows.push(['vs previous', fmtPct(change) + (m.threshold !== null ? ' (threshold ' + m.threshold + '%)' : ''), beyond]);
        }
        if (eff) {
          rows.push(['efficiency', eff.label]);
          if (eff.detail) rows.push(['achieved', eff.detail]);
        }
        add(mark, svg('title', null, label + '\n' + rows.map(function (r) { return r[0] + ': ' + r[1]; }).join('\n')));
        var target = linked(commit && commit.url, mark, true);
        info.set(target, { title: label, subject: commit ? str(commit.subject) : '', rows: rows });
        g.appendChild(target);
        markers++;
      });
      s.appendChild(g);
      legendItems.push({ g: g, label: ser, colour: colour, shape: shape, isRef: isRef, n: pts.length });
    });
    s.setAttribute('data-series', String(series.length));
    s.setAttribute('data-points', String(markers));
    if (nPoints === 0) {
      add(s, svg('text', { class: 'kg-axis-title', x: ml + pw / 2, y: panels[0].top + plotH / 2, 'text-anchor': 'middle' }, 'No measurements.'));
    }
    bindTooltips(s, info);

    var kernels = series.filter(function (x) { return x.kind !== 'reference'; }).length;
    add(head, el('span', { class: 'kg-meta' },
      kernels + ' kernel series, ' + (series.length - kernels) + ' reference series, ' + markers +
      (markers === 1 ? ' point' : ' points') +
      (drifts.length ? ', ' + drifts.length + ' drift alert' + (drifts.length > 1 ? 's' : '') : '')));

    var wrap = el('div', { class: 'kg-plot-wrap' });
    wrap.appendChild(s);
    sec.appendChild(wrap);

    var legend = el('ul', { class: 'kg-legend' });
    legendItems.forEach(function (it) {
      var li = el('li');
      var b = el('button', { type: 'button', 'aria-pressed': 'true', title: 'show or hide this series' });
      add(b, swatch(it.colour, it.shape, it.isRef), pathNode('span', 'kg-lname', it.label.name),
        el('span', { class: 'kg-lhw' }, '\u00b7 ' + str(it.label.hardware)));
      b.addEventListener('click', function () {
        var on = b.getAttribute('aria-pressed') !== 'true';
        b.setAttribute('aria-pressed', on ? 'true' : 'false');
        it.g.classList.toggle('kg-hidden', !on);
        hideTooltip();
      });
      li.appendChild(b);
      legend.appendChild(li);
    });
    sec.appendChild(legend);
    add(sec, el('p', { class: 'kg-key' },
      'Markers: median time; whiskers: interval; hollow red markers: incorrect; dashed lines: references; ' +
      'marker shape: hardware; dotted vertical lines: drift' +
      (m.threshold !== null ? '; shaded band: the previous commit\u2019s time \u00b1 the ' + m.threshold +
        '% regression threshold' : '') +
      (m.repoUrl ? '. Click a point to open its commit' : '') + '. Click a legend entry to hide its series.'));

    counters.plots++;
    counters.points += markers;
    return sec;
  }

  // ---------------------------------------------------------------- entry

  function render(root, data) {
    var m = model(data);
    var counters = { plots: 0, points: 0 };
    root.appendChild(header(m));
    if (m.problems.length === 0) {
      var none = el('section', { class: 'kg-card' });
      add(none, el('p', { class: 'kg-empty kg-no-history' }, 'No history yet.'));
      add(none, el('p', { class: 'kg-desc' }, 'Timings appear here once kernelgate has recorded a run on the default branch.'));
      root.appendChild(none);
    } else {
      var top = el('div', { class: 'kg-grid2' });
      add(top, fastPChart(m), driftList(m));
      root.appendChild(fastestTable(m));
      root.appendChild(top);
      root.appendChild(toc(m));
      m.problems.forEach(function (p) { root.appendChild(problemSection(m, p, counters)); });
    }
    add(root, el('footer', { class: 'kg-footer' },
      'Generated by kernelgate. Times are medians with their confidence intervals; x positions are commits in history order, labelled with their commit dates.'));
    document.body.setAttribute('data-kg-plots', String(counters.plots));
    document.body.setAttribute('data-kg-points', String(counters.points));
    document.body.setAttribute('data-kg-rendered', 'ok');
    // A link to a section that did not exist at load time now lands on it.
    if (location.hash.length > 1) {
      var target = document.getElementById(decodeURIComponent(location.hash.slice(1)));
      if (target && target.scrollIntoView) target.scrollIntoView();
    }
  }

  function fail(message) {
    var root = document.getElementById('kg-root') || document.body;
    while (root.firstChild) root.removeChild(root.firstChild);
    var old = document.getElementById('kg-error');
    if (old) old.parentNode.removeChild(old);
    root.appendChild(el('div', { id: 'kg-error', role: 'alert' }, message));
    document.body.setAttribute('data-kg-plots', '0');
    document.body.setAttribute('data-kg-points', '0');
    document.body.setAttribute('data-kg-rendered', 'error');
  }

  function main() {
    var data;
    try {
      var node = document.getElementById('kg-data');
      if (!node) throw new Error('the page has no kg-data element');
      data = JSON.parse(node.textContent);
      if (!data || typeof data !== 'object' || Array.isArray(data)) throw new Error('the data is not a JSON object');
    } catch (e) {
      fail('Could not read the dashboard data: ' + (e && e.message ? e.message : String(e)));
      return;
    }
    try {
      render(document.getElementById('kg-root') || document.body, data);
    } catch (e) {
      fail('Could not draw the dashboard: ' + (e && e.message ? e.message : String(e)));
    }
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', main);
  else main();
})();
