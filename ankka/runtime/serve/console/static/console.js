// The console's one script. Two jobs, both against this server only:
// - refresh each [data-refresh="SECONDS"] region in place by fetching the same page again
//   and swapping the region's contents;
// - follow a task's notifications (server-sent events) into each <ol data-events="URL">,
//   one item per event, and reload the page when the task ends so the server renders it.
// Without script the pages are complete as served.
(function () {
  "use strict";
  var FINAL = ["task_completed", "task_failed", "task_cancelled"];
  var EVENTS = ["snapshot", "dropped", "activated", "passivated", "iteration_started",
    "iteration_completed", "iteration_failed", "task_assigned", "task_started",
    "task_result_rejected", "task_waiting", "budget_approaching", "model_calls_failing",
    "dependency_pending_long"].concat(FINAL);

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

  function describe(name, data) {
    if (name === "dropped") { return data.count + " notification(s) missed"; }
    if (name === "snapshot") { return "now " + data.state; }
    var text = name.replace(/_/g, " ");
    if (data.iteration !== undefined) { text += " " + data.iteration; }
    return text;
  }

  function follow(list) {
    var source = new EventSource(list.getAttribute("data-events"));
    EVENTS.forEach(function (name) {
      source.addEventListener(name, function (event) {
        var data = {};
        try { data = JSON.parse(event.data); } catch (e) { /* shown by name only */ }
        var item = document.createElement("li");
        item.setAttribute("data-event", name);
        item.textContent = describe(name, data);
        list.appendChild(item);
        if (FINAL.indexOf(name) >= 0 || (name === "snapshot" &&
            ["completed", "failed", "cancelled"].indexOf(data.state) >= 0)) {
          source.close();
          window.location.reload();
        }
      });
    });
  }

  document.querySelectorAll("[data-refresh]").forEach(refresh);
  document.querySelectorAll("ol[data-events]").forEach(follow);
})();
