// Shows every <time datetime> of the page in the viewer's own time zone. The server renders
// UTC text and a title holding UTC; this keeps the title (UTC on hover) and rewrites the text.
// Pages work without it. No inline script exists: the CSP allows only this file.
"use strict";
(function () {
  var format = new Intl.DateTimeFormat(undefined, {
    year: "numeric", month: "2-digit", day: "2-digit",
    hour: "2-digit", minute: "2-digit", second: "2-digit",
    timeZoneName: "short"
  });
  function localise() {
    var stamps = document.querySelectorAll("time[datetime]");
    for (var i = 0; i < stamps.length; i++) {
      var el = stamps[i];
      var at = new Date(el.getAttribute("datetime"));
      if (isNaN(at.getTime())) { continue; }
      if (!el.title) { el.title = el.textContent; }
      el.textContent = format.format(at);
      el.setAttribute("data-local", "true");
    }
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", localise);
  } else {
    localise();
  }
})();
