// The layer slider and the views it drives, switched in the browser: every slider position was drawn by
// rollout_core.figures.layer_views, so a move only swaps what is shown (no round trip to the server).
// The chosen position is reported back (debounced) so the URL and server-side views can follow.
// `data` is an ExplorerData (rollout_core/figures/explorer_payload.py, the contract): a view is
// payload.views[mode][layer - 1], its `marker` goes into data-view; a control names the trace it sets.
// Nothing here builds a key or a trace name. The views' HTML comes from the core, which escapes all user text.

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

function unshare(value, shared) {
  if (Array.isArray(value)) return value.map((item) => unshare(item, shared));
  if (value && typeof value === "object") {
    if (Object.keys(value).length === 1 && "$shared" in value) return shared[value.$shared];
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, unshare(v, shared)]));
  }
  return value;
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
  const state = root.lxState || (root.lxState = { id: null, layer: data.layer, raw: data.raw, timer: null, controls: {} });
  const controls = data.controls || [];
  for (const c of controls) if (!(c.key in state.controls)) state.controls[c.key] = c.value;

  root.querySelector(".lx-label").textContent = data.label;
  root.querySelector(".lx-raw-label").textContent = data.raw_label;
  slider.setAttribute("aria-label", data.label);
  slider.max = String(data.layers);
  root.querySelector(".lx-slider").hidden = data.layers < 2;

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

  const views = data.payload.views;
  const shared = data.payload.shared;
  const resolved = { cumulative: [], raw: [] };
  const figureBox = root.querySelector(".lx-figures");
  const errorBox = root.querySelector(".lx-error");

  function current() {
    const mode = state.raw ? "raw" : "cumulative";
    const i = state.layer - 1;
    return resolved[mode][i] || (resolved[mode][i] = unshare(views[mode][i], shared));
  }

  function show() {
    const view = current();
    slider.value = String(state.layer);
    toggle.checked = state.raw;
    root.querySelector(".lx-value").textContent = `${state.layer} / ${data.layers}`;
    root.querySelector(".lx-html").innerHTML = view.html;
    root.querySelector(".lx-summary").textContent = view.summary;
    root.dataset.view = view.marker;
    while (figureBox.children.length > view.figures.length) figureBox.lastChild.remove();
    while (figureBox.children.length < view.figures.length) figureBox.appendChild(document.createElement("div"));
    if (!view.figures.length || !data.plotly_url) return; // no plotly.js: the page says why
    loadPlotly(data.plotly_url).then((Plotly) => {
      if (current() !== view) return; // the slider moved on meanwhile
      const style = getComputedStyle(root); // follow the app's font and theme (light or dark)
      const font = { family: style.fontFamily, color: style.color };
      view.figures.forEach((figure, i) => {
        const layout = { paper_bgcolor: "rgba(0,0,0,0)", ...figure.layout, template: data.payload.template,
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

  function report() {
    clearTimeout(state.timer);
    state.timer = setTimeout(() => setStateValue("view", { layer: state.layer, raw: state.raw,
                                                            controls: { ...state.controls } }), REPORT_DELAY_MS);
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
    show();
    report();
  };

  if (state.id !== data.payload.id) {
    state.layer = Math.max(1, Math.min(state.id === null ? data.layer : state.layer, data.layers));
    state.id = data.payload.id;
    show();
  }
  return () => clearTimeout(state.timer);
}
