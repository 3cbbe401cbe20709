// Colours and numbers the layer explorer draws with, the browser's twins of rollout_core.figures._common:
// colourAt = colours_at (np.interp between a scale's RGB stops, then round half to even), inkFor = ink_for,
// formatG = Python's format(x, ".<p>g"). tests/test_explorer_colours.py runs these under node against Python.

function colourAt(stops, value, zmin, zmax) {
  const span = zmax - zmin;
  const t = span <= 0 ? 0 : Math.min(1, Math.max(0, (value - zmin) / span));
  let j = 0;
  while (j + 1 < stops.length && stops[j + 1][0] <= t) j += 1;
  return [1, 2, 3].map((c) => {
    if (j === stops.length - 1 || stops[j][0] === t) return roundHalfEven(stops[j][c]);
    const slope = (stops[j + 1][c] - stops[j][c]) / (stops[j + 1][0] - stops[j][0]);
    return roundHalfEven(slope * (t - stops[j][0]) + stops[j][c]);
  });
}

function roundHalfEven(x) {
  const floor = Math.floor(x);
  const rest = x - floor;
  if (rest !== 0.5) return Math.round(x);
  return floor % 2 === 0 ? floor : floor + 1;
}

function inkFor(rgb) {
  const [r, g, b] = rgb.map((c) => {
    const v = c / 255;
    return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.179 ? "#000000" : "#ffffff";
}

function formatG(x, precision) {
  if (x === 0) return "0";
  if (!Number.isFinite(x)) return String(x);
  const [mantissa, exp] = x.toExponential(precision - 1).split("e");
  const exponent = Number(exp);
  const strip = (s) => (s.includes(".") ? s.replace(/0+$/, "").replace(/\.$/, "") : s);
  if (exponent < -4 || exponent >= precision) {
    const digits = String(Math.abs(exponent)).padStart(2, "0");
    return `${strip(mantissa)}e${exponent < 0 ? "-" : "+"}${digits}`;
  }
  return strip(x.toFixed(Math.max(0, precision - 1 - exponent)));
}
