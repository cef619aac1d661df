// A test page (console/cspstyle_test.go): xterm.js opened under the
// console's CSP, with the style shim unless ?noshim is given. It records
// every CSP violation and says when its output has been drawn.
window.violations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.violations.push(`${e.violatedDirective} ${e.blockedURI} ${e.sample} ${e.target && e.target.outerHTML ? e.target.outerHTML.slice(0, 120) : ""}`);
});
if (!new URLSearchParams(location.search).has("noshim")) {
  const { installStyleShim } = await import("/console/cspstyle.js");
  installStyleShim();
}
const { Terminal } = await import("/console/vendor/xterm/xterm.esm.js");
const { FitAddon } = await import("/console/vendor/xterm/addon-fit.esm.js");
const term = new Terminal({ theme: { foreground: "#c0ffee", background: "#101010" } });
const fit = new FitAddon();
term.loadAddon(fit);
term.open(document.getElementById("term"));
fit.fit();
term.write("plain \x1b[38;2;255;0;0mRED\x1b[0m\r\n", () => {
  // Drawing happens on the next animation frame after the write.
  requestAnimationFrame(() => requestAnimationFrame(() => { document.body.dataset.drawn = "1"; }));
});
window.term = term;
