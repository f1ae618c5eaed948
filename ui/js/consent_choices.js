// The consent's choices (setup_agent/setup/consent_choices.py): a line the person answers by
// picking one option, drawn from the consent's data ({name, label, options: [{value, label}],
// default}) as a group of radio buttons, the default picked. An install's asks whether the
// server may ask your AI to write text.

import { el } from "./dom.js";

export function drawChoices(box, choices) {
  box.textContent = "";
  (choices || []).forEach(function (choice) {
    var group = el("fieldset", { class: "consent-choice", "data-choice": choice.name },
                   [el("legend", { text: choice.label })]);
    choice.options.forEach(function (option) {
      var radio = el("input", { type: "radio", name: "consent-choice-" + choice.name, "data-value": option.value });
      radio.checked = option.value === choice.default;
      group.appendChild(el("label", { class: "check" }, [radio, " " + option.label]));
    });
    box.appendChild(group);
  });
  box.hidden = !(choices && choices.length);
}

// {name: value} of the options picked in box.
export function chosen(box) {
  var out = {};
  Array.prototype.forEach.call(box.querySelectorAll("fieldset[data-choice]"), function (group) {
    var picked = group.querySelector("input[type=radio]:checked");
    if (picked) out[group.getAttribute("data-choice")] = picked.getAttribute("data-value");
  });
  return out;
}
