// Live conversation page: reloads the timeline when the server says the conversation
// changed (server-sent events). No build step, no dependencies.
(function () {
  "use strict";
  var root = document.getElementById("live");
  if (!root || !window.EventSource || !window.fetch) return;
  var fragmentUrl = root.getAttribute("data-fragment") + window.location.search;
  var eventsUrl = root.getAttribute("data-events") + "?v=" + encodeURIComponent(root.getAttribute("data-version"));
  var loading = false;
  var again = false;

  function reload() {
    if (loading) { again = true; return; }
    loading = true;
    fetch(fragmentUrl, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (response) {
        // An expired session redirects to the login page: go there rather than nest it here.
        if (response.redirected) { window.location.assign(response.url); throw new Error("logged out"); }
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.text();
      })
      .then(function (html) {
        // A trace the reader opened stays open across the reload.
        var open = Array.prototype.map.call(root.querySelectorAll("details[open][id]"), function (d) { return d.id; });
        root.innerHTML = html;
        open.forEach(function (id) {
          var d = document.getElementById(id);
          if (d && root.contains(d)) d.open = true;
        });
      })
      .catch(function () { /* the next event tries again */ })
      .then(function () {
        loading = false;
        if (again) { again = false; reload(); }
      });
  }

  var source = new EventSource(eventsUrl);
  source.addEventListener("change", reload);
})();
