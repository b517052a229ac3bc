// The console's one script. Two jobs, both against this server only:
// - refresh each [data-refresh="SECONDS"] region in place by fetching the same page again
//   and swapping the region's contents;
// - follow a task's notifications (server-sent events) into each <ol data-events="URL">,
//   one item per event of every kind the list's data-names gives (the server's list of
//   what the stream sends), and reload the page when the task ends so the server renders it.
// Without script the pages are complete as served.
(function () {
  "use strict";
  var FINAL = ["task_completed", "task_failed", "task_cancelled"];
  var LONGEST = 200;  // an artifact's text, shown cut to this many characters

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

  function cut(text) {
    text = String(text === undefined || text === null ? "" : text);
    return text.length > LONGEST ? text.slice(0, LONGEST) + "…" : text;
  }

  function describe(name, data) {
    if (name === "dropped") { return data.count + " notification(s) missed"; }
    if (name === "snapshot") { return "now " + data.state; }
    if (name === "task_delegated") {
      return "delegated task " + data.child + " to " + data.child_agent;
    }
    if (name === "task_handed_off") {
      return "handed off to " + data.to + (data.note ? ": " + cut(data.note) : "");
    }
    if (name === "task_artifact") {
      return "artifact " + (data.name || data.artifact) + " from " + data.agent + ": " +
        cut(data.text);
    }
    if (name === "approval_requested") { return "approval requested for " + data.tool; }
    if (name === "approval_decided") {
      return "approval " + data.id + " " + data.decision + " by " + data.decided_by;
    }
    if (name === "approval_expiring") {
      return "approval for " + data.tool + " expires at " + data.expires_at;
    }
    var text = name.replace(/_/g, " ");
    if (data.iteration !== undefined) { text += " " + data.iteration; }
    return text;
  }

  function follow(list) {
    var source = new EventSource(list.getAttribute("data-events"));
    var names = (list.getAttribute("data-names") || "snapshot").split(" ");
    names.forEach(function (name) {
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
