// Runtime styles under the console's Content Security Policy.
//
// The console is served with style-src 'self' and no 'unsafe-inline', so a
// <style> element that a script fills and a style="" attribute that a script
// sets are both refused by the browser. xterm.js (6.0) does both: its DOM
// renderer writes the cell size, font and theme colours into <style>
// elements it creates, and it colours 24-bit-colour cells with
// setAttribute("style", ...). It has no option to avoid either (there is no
// nonce option either). Without them the terminal would lay out wrongly and
// lose its colours, and every refusal would be logged as a CSP violation.
//
// The CSS object model is not governed by style-src: a constructed
// CSSStyleSheet adopted by the document, and element.style.cssText, apply
// without a CSP exception. That is what this module routes xterm's two
// paths through, so the console keeps its strict policy. Only scripts the
// console serves itself can reach either path (script-src 'self'); markup
// with a style attribute is still refused, and the console never builds
// markup from data anyway (dom.js sets textContent only).
//
// installStyleShim patches the document once, the first time a terminal
// opens; pages that never open one are left as they are:
//   - document.createElement("style") returns an inert <template> element
//     whose textContent feeds a constructed stylesheet adopted by the
//     document (dropped again by the element's remove(), as xterm does on
//     dispose). It cannot be a <style> element: the browser refuses even an
//     empty one that a script inserts, and reports it as a violation.
//   - setAttribute("style", v) on a <span> (xterm's cells are spans) sets
//     element.style.cssText = v instead.

let installed = false;

// adoptedStyle turns el, a fresh <template> element of doc, into a stand-in
// for a <style> element whose text lives in a constructed stylesheet.
function adoptedStyle(doc, el) {
  const sheet = new doc.defaultView.CSSStyleSheet();
  let text = "";
  let adopted = false;
  const drop = () => {
    if (adopted) {
      doc.adoptedStyleSheets = doc.adoptedStyleSheets.filter((s) => s !== sheet);
      adopted = false;
    }
  };
  Object.defineProperty(el, "textContent", {
    configurable: true,
    get: () => text,
    set: (v) => {
      text = v == null ? "" : String(v);
      sheet.replaceSync(text);
      if (!adopted) {
        doc.adoptedStyleSheets = [...doc.adoptedStyleSheets, sheet];
        adopted = true;
      }
    },
  });
  const remove = el.remove;
  el.remove = function () {
    drop();
    remove.call(this);
  };
  el.dataset.style = "adopted";
  return el;
}

// installStyleShim makes <style> elements and span style attributes that
// scripts create go through the CSS object model (see above). It is safe to
// call more than once.
export function installStyleShim() {
  if (installed) return;
  installed = true;
  const create = Document.prototype.createElement;
  Document.prototype.createElement = function (tag, options) {
    if (String(tag).toLowerCase() === "style") {
      return adoptedStyle(this, create.call(this, "template"));
    }
    return create.call(this, tag, options);
  };
  const setAttribute = Element.prototype.setAttribute;
  HTMLSpanElement.prototype.setAttribute = function (name, value) {
    if (String(name).toLowerCase() === "style") {
      this.style.cssText = String(value);
      return;
    }
    setAttribute.call(this, name, value);
  };
}
