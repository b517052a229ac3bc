// The console's one script: refresh each [data-refresh="SECONDS"] region in place by fetching
// the same page again from this server and swapping the region's contents. Nothing else is
// fetched; without script the pages are complete as served.
(function () {
  "use strict";
  function refresh(region, index) {
    var seconds = Number(region.getAttribute("data-refresh")) || 5;
    window.setTimeout(function again() {
      fetch(window.location.href, { headers: { "Accept": "text/html" } })
        .then(function (r) { return r.ok ? r.text() : null; })
        .then(function (text) {
          if (text !== null) {
            var page = new DOMParser().parseFromString(text, "text/html");
            var fresh = page.querySelectorAll("[data-refresh]")[index];
            if (fresh) { region.innerHTML = fresh.innerHTML; }
          }
        })
        .catch(function () { /* the server is away; try again next time */ })
        .finally(function () { window.setTimeout(again, seconds * 1000); });
    }, seconds * 1000);
  }
  document.querySelectorAll("[data-refresh]").forEach(refresh);
})();
