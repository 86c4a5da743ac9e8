// The edit form's "Insert a picture" list: shows each picture's Insert button and puts its
// Markdown into the text field at the cursor. Progressive enhancement only: without it the
// Markdown is there to copy.
(function () {
  "use strict";
  var text = document.getElementById("field-text");
  if (!text) { return; }
  document.querySelectorAll("button.media-insert").forEach(function (button) {
    button.hidden = false;
    button.addEventListener("click", function () {
      var markdown = button.getAttribute("data-markdown") || "";
      var start = text.selectionStart || 0;
      var end = text.selectionEnd || start;
      var before = text.value.slice(0, start);
      var after = text.value.slice(end);
      var lead = before === "" || before.slice(-1) === "\n" ? "" : "\n\n";
      var trail = after === "" || after.charAt(0) === "\n" ? "" : "\n\n";
      text.value = before + lead + markdown + trail + after;
      var caret = (before + lead + markdown).length;
      text.focus();
      text.setSelectionRange(caret, caret);
      text.dispatchEvent(new Event("input", { bubbles: true }));
    });
  });
})();
