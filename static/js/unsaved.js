// Warns before leaving a page whose edit form has unsaved changes (forms marked
// data-unsaved-warning). Progressive enhancement only: every action works without it.
(function () {
  "use strict";
  var forms = document.querySelectorAll("form[data-unsaved-warning]");
  var dirty = false;
  forms.forEach(function (form) {
    // A form sent back unsaved (a preview, errors to correct) starts with changes to keep.
    if (form.hasAttribute("data-unsaved-changes")) { dirty = true; }
    form.addEventListener("input", function () { dirty = true; });
    form.addEventListener("submit", function () { dirty = false; });
  });
  window.addEventListener("beforeunload", function (event) {
    if (dirty) {
      event.preventDefault();
      event.returnValue = "";
    }
  });
})();
