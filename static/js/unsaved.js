// Warns before leaving a page whose edit form has unsaved changes (forms marked
// data-unsaved-warning). Progressive enhancement only: every action works without it.
(function () {
  "use strict";
  var forms = document.querySelectorAll("form[data-unsaved-warning]");
  var dirty = false;
  forms.forEach(function (form) {
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
