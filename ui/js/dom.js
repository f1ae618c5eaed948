// Small DOM helpers shared by every part of the page: look up by id, build an element, show or
// hide an error line. Text always goes in as text nodes, never as HTML.

export var $ = function (id) { return document.getElementById(id); };

export function el(tag, attrs, children) {
  var node = document.createElement(tag);
  if (attrs) {
    Object.keys(attrs).forEach(function (key) {
      var value = attrs[key];
      if (value === null || value === undefined || value === false) return;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else if (key.indexOf("data-") === 0 || key.indexOf("aria-") === 0 || key === "role" || key === "type" ||
               key === "for" || key === "id" || key === "name" || key === "autocomplete" || key === "maxlength")
        node.setAttribute(key, value === true ? "" : String(value));
      else node[key] = value;
    });
  }
  (children || []).forEach(function (child) {
    if (child === null || child === undefined) return;
    node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
  });
  return node;
}

export function showError(node, text) {
  node.textContent = text || "";
  node.hidden = !text;
}
