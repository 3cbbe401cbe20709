// The layer slider and the views it drives, drawn in the browser from numbers: rollout_core.figures.layer_views
// sends what stays fixed once (token texts, the photo, the figures' layout: payload.panels) and per slider position
// only its scores, tops, titles and summary, so a move draws here with no round trip to the server.
// The chosen position is reported back (debounced) so the URL and server-side views can follow.
// `data` is an ExplorerData (rollout_core/figures/explorer_payload.py, the contract): a view is
// payload.views[mode][layer - 1], its markers go into data-view; panels and controls name the traces they set.
// Nothing here builds a key or a trace name. Token texts are user text: they only ever go in as textContent;
// the only HTML inserted is the view's `html`, which the core escapes. Colours: layer_colours.js (colourAt).

const REPORT_DELAY_MS = 250;
const plotlyLoads = {};

function loadPlotly(url) {
  if (window.Plotly) return Promise.resolve(window.Plotly);
  if (!plotlyLoads[url]) {
    plotlyLoads[url] = new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = url;
      script.onload = () => resolve(window.Plotly);
      script.onerror = () => reject(new Error(`plotly.js could not be loaded from ${url}`));
      document.head.appendChild(script);
    });
  }
  return plotlyLoads[url];
}

const SPAN_STYLE = "padding:0.1em 0.15em;border-radius:0.25em;";
const LEGEND_STYLE = "display:flex;align-items:center;gap:0.5em;font-size:0.8em;margin-top:0.3em";
const BAR_STYLE = "display:inline-block;width:12em;height:0.8em;border-radius:0.2em;";

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

// A panel's runs (text, control code, text, ...) into `target`, as text nodes and code chips.
function appendRuns(target, runs) {
  runs.forEach((run, k) => {
    if (k % 2 === 0) {
      if (run) target.appendChild(document.createTextNode(run));
      return;
    }
    const code = element("span", "ctrl-char", run);
    code.style.cssText = "font-family:monospace;opacity:0.7";
    target.appendChild(code);
  });
}

// The token highlight (rollout_core.figures.text.token_highlight_html, drawn here) and its legend.
function highlight(panel, stops, values, bottom, top, panelView) {
  const signed = bottom < 0; // values for (+) and against (-) the class, on a scale centred at 0
  const box = element("div", "token-highlight");
  box.dataset.view = panelView.marker;
  box.style.cssText = "line-height:2.2;white-space:pre-wrap";
  for (const [unit, ...runs] of panel.pieces) {
    if (unit < 0) {
      appendRuns(box, runs);
      continue;
    }
    const value = values[unit];
    const rgb = colourAt(stops, value, bottom, top);
    const span = element("span", "tok");
    appendRuns(span, runs);
    span.dataset.score = String(value);
    span.title = signed
      ? `${runs.join("")}: ${formatG(value, 6)} (${value >= 0 ? "+" : ""}${(100 * value).toFixed(2)}% of the evidence, ${value >= 0 ? "for" : "against"})`
      : `${runs.join("")}: ${formatG(value, 6)} (${(100 * value).toFixed(2)}% of the shown mass)`;
    span.style.cssText = `${SPAN_STYLE}background:rgb(${rgb.join(",")});color:${inkFor(rgb)}`;
    box.appendChild(span);
  }
  const legend = element("div", "token-legend");
  legend.style.cssText = LEGEND_STYLE;
  const gradient = element("span");
  const colours = Array.from({ length: 11 }, (_, k) => `rgb(${colourAt(stops, k / 10, 0, 1).join(",")})`);
  gradient.style.cssText = `${BAR_STYLE}background:linear-gradient(to right,${colours.join(",")})`;
  legend.append(element("span", "", signed ? formatG(bottom, 3) : "0"), gradient, element("span", "", formatG(top, 3)),
                element("span", "", `${panelView.title}: ${signed ? "signed share: for (+) / against (\u2212)" : "share of the shown mass"}`));
  return [box, legend];
}

// A figure panel at one view: the base figure with this view's values (bars: heights and colours; map: a grid).
function panelFigure(panel, values, bottom, top, panelView) {
  const { figure } = panel;
  const data = figure.data.map((trace, i) => {
    if (i !== panel.trace) return trace;
    if (panel.kind === "bars") {
      return { ...trace, y: values, marker: { ...trace.marker, color: values, cmin: bottom, cmax: top } };
    }
    const cols = values.length / panel.rows;
    const z = Array.from({ length: panel.rows }, (_, r) => values.slice(r * cols, (r + 1) * cols));
    return { ...trace, z, zmin: bottom, zmax: top };
  });
  const layout = { ...figure.layout, title: { ...(figure.layout.title || {}), text: panelView.title } };
  if (panel.kind === "bars") layout.yaxis = { ...figure.layout.yaxis, range: [bottom * 1.05, top * 1.05] };
  return { data, layout };
}

// The view's highlights (side by side under their headings when several) and the core's HTML below them.
function drawHtml(box, payload, view) {
  const parts = [];
  payload.panels.forEach((panel, i) => {
    if (panel.kind !== "highlight") return;
    const nodes = highlight(panel, payload.scales[panel.scale], view.series[panel.series],
                            view.bottoms[panel.series], view.tops[panel.series], view.panels[i]);
    parts.push({ heading: panel.heading, nodes });
  });
  const children = [];
  if (parts.length === 1 && !parts[0].heading) children.push(...parts[0].nodes);
  else if (parts.length) {
    const row = element("div");
    row.style.cssText = "display:flex;gap:1.5em";
    for (const part of parts) {
      const column = element("div");
      column.style.cssText = "flex:1;min-width:0";
      const heading = element("p");
      heading.appendChild(element("b", "", part.heading));
      column.append(heading, ...part.nodes);
      row.appendChild(column);
    }
    children.push(row);
  }
  const extra = element("div");
  extra.innerHTML = view.html; // escaped by the core (layer_views)
  children.push(...extra.childNodes);
  box.replaceChildren(...children);
}

function build(parent) {
  const root = document.createElement("div");
  root.className = "lx-root";
  root.innerHTML = `
    <div class="lx-controls">
      <label class="lx-slider"><span class="lx-label"></span>
        <span class="lx-row"><input type="range" min="1" step="1"><output class="lx-value"></output></span>
      </label>
      <label class="lx-toggle"><input type="checkbox"> <span class="lx-raw-label"></span></label>
      <span class="lx-controls-extra"></span>
    </div>
    <div class="lx-error" hidden></div>
    <div class="lx-html"></div>
    <p class="lx-summary"></p>
    <div class="lx-figures"></div>`;
  parent.appendChild(root);
  return root;
}

export default function (component) {
  const { data, parentElement, setStateValue } = component;
  let root = parentElement.querySelector(".lx-root");
  if (!root) root = build(parentElement);
  const slider = root.querySelector('input[type="range"]');
  const toggle = root.querySelector('input[type="checkbox"]');
  const state = root.lxState || (root.lxState = { id: null, identity: data.identity, layer: data.layer, raw: data.raw,
                                                  timer: null, controls: {} });
  if (state.identity !== data.identity) {
    // another method, model, modality or depth: the server reset the view to its final map (data.layer, data.raw);
    // a report of a move on the old view still waiting is dropped (the server ignores one for another identity)
    clearTimeout(state.timer);
    Object.assign(state, { id: null, identity: data.identity, layer: data.layer, raw: data.raw });
  }
  const controls = data.controls || [];
  for (const c of controls) if (!(c.key in state.controls)) state.controls[c.key] = c.value;

  root.querySelector(".lx-raw-label").textContent = data.raw_label;
  // the slider says what it moves: the cumulative result, or (per-layer view on) one layer alone
  const labelSlider = () => {
    const label = state.raw ? data.raw_slider_label : data.label;
    root.querySelector(".lx-label").textContent = label;
    slider.setAttribute("aria-label", label);
  };
  slider.max = String(data.layers);
  // one map of the whole model (AttnLRP): the slider moves only the per-layer (raw) view, so it shows only there
  const showSlider = () => {
    root.querySelector(".lx-slider").hidden = data.layers < 2 || (data.one_map && !state.raw);
    labelSlider();
  };
  showSlider();

  const extra = root.querySelector(".lx-controls-extra");
  if (extra.dataset.keys !== controls.map((c) => c.key).join()) {
    extra.dataset.keys = controls.map((c) => c.key).join();
    extra.replaceChildren(...controls.map((c) => {
      const label = document.createElement("label");
      label.className = "lx-slider lx-control";
      label.innerHTML = '<span class="lx-label"></span><span class="lx-row"><input type="range"><output class="lx-value"></output></span>';
      label.querySelector(".lx-label").textContent = c.label;
      const input = label.querySelector("input");
      Object.assign(input, { min: c.min, max: c.max, step: c.step, value: state.controls[c.key] });
      input.setAttribute("aria-label", c.label);
      label.querySelector("output").textContent = Number(input.value).toFixed(2);
      return label;
    }));
  }

  const payload = data.payload;
  const views = payload.views;
  const figureBox = root.querySelector(".lx-figures");
  const errorBox = root.querySelector(".lx-error");

  function current() {
    const mode = state.raw ? "raw" : "cumulative";
    const i = state.layer - 1;
    return views[mode][i];
  }

  function figuresOf(view) {
    const drawn = [];
    payload.panels.forEach((panel, i) => {
      if (panel.kind === "highlight") return;
      drawn.push(panelFigure(panel, view.series[panel.series], view.bottoms[panel.series], view.tops[panel.series],
                             view.panels[i]));
    });
    return drawn.concat(view.figures);
  }

  function show() {
    const view = current();
    slider.value = String(state.layer);
    toggle.checked = state.raw;
    root.querySelector(".lx-value").textContent = view.position || `${state.layer} / ${data.layers}`;
    drawHtml(root.querySelector(".lx-html"), payload, view);
    root.querySelector(".lx-summary").textContent = view.summary;
    root.dataset.view = view.marker;
    const figures = figuresOf(view);
    while (figureBox.children.length > figures.length) figureBox.lastChild.remove();
    while (figureBox.children.length < figures.length) figureBox.appendChild(document.createElement("div"));
    if (!figures.length || !data.plotly_url) return; // no plotly.js: the page says why
    loadPlotly(data.plotly_url).then((Plotly) => {
      if (current() !== view) return; // the slider moved on meanwhile
      const style = getComputedStyle(root); // follow the app's font and theme (light or dark)
      const font = { family: style.fontFamily, color: style.color };
      figures.forEach((figure, i) => {
        const layout = { paper_bgcolor: "rgba(0,0,0,0)", ...figure.layout, template: payload.template,
                         font: { ...font, ...figure.layout.font } };
        const traces = figure.data.map((trace) => controls.reduce((t, c) => (
          t.name === c.trace ? { ...t, [c.attribute]: state.controls[c.key] } : t), trace));
        Plotly.react(figureBox.children[i], traces, layout, { responsive: true, displaylogo: false });
      });
    }).catch((error) => {
      errorBox.hidden = false;
      errorBox.textContent = `${error.message}: the figures cannot be drawn (the highlight and summary still follow the slider).`;
    });
  }

  // The address bar follows at once (the server's settings catch up after the debounced report): each setting
  // named in data.url is written as the server writes it (state.py), and left out at its default.
  function followInUrl() {
    const url = data.url;
    if (!url) return;
    const params = new URLSearchParams(window.location.search);
    const put = (name, value, fallback) => (value === fallback ? params.delete(name) : params.set(name, value));
    put(url.layer, String(state.layer), String(data.layers));
    put(url.raw, state.raw ? "1" : "0", "0");
    for (const c of controls) put(c.key, String(state.controls[c.key]), String(url.defaults[c.key]));
    const query = params.toString();
    const next = `${window.location.pathname}${query ? `?${query}` : ""}${window.location.hash}`;
    if (next !== `${window.location.pathname}${window.location.search}${window.location.hash}`) {
      window.history.replaceState(window.history.state, "", next);
    }
  }

  function report() {
    followInUrl();
    clearTimeout(state.timer);
    const view = { layer: state.layer, raw: state.raw, controls: { ...state.controls }, identity: state.identity };
    state.timer = setTimeout(() => setStateValue("view", view), REPORT_DELAY_MS);
  }

  // handlers are set on every call: they must draw from this call's data (a new payload replaces the old)
  controls.forEach((c, i) => {
    const label = extra.children[i];
    const input = label.querySelector("input");
    input.oninput = () => {
      state.controls[c.key] = Number(input.value);
      label.querySelector("output").textContent = Number(input.value).toFixed(2);
      show();
      report();
    };
  });
  slider.oninput = () => {
    state.layer = Number(slider.value);
    show();
    report();
  };
  toggle.onchange = () => {
    state.raw = toggle.checked;
    showSlider();
    show();
    report();
  };

  if (state.id !== payload.id) {
    state.layer = Math.max(1, Math.min(state.id === null ? data.layer : state.layer, data.layers));
    state.id = payload.id;
    show();
  }
  return () => clearTimeout(state.timer);
}
