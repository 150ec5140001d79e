// Live refresh for the Wiggle console: every element with data-refresh="URL" is re-fetched
// (same URL, header X-Wiggle-Fragment: 1, which answers only that part) and replaced, while
// the tab is visible. It stops once the part says data-finished, or the answer is not a page
// part (a redirect to the login page, an error). No inline script: the CSP forbids it.
(function () {
  "use strict";
  var body = document.body;
  var period = Number(body.getAttribute("data-refresh-ms")) || 2000;

  function finished(el) {
    return el.querySelector("[data-finished]") !== null;
  }

  function refresh(el) {
    if (document.hidden || finished(el)) {
      return Promise.resolve(!finished(el));
    }
    return fetch(el.getAttribute("data-refresh"), {
      headers: { "X-Wiggle-Fragment": "1" },
      credentials: "same-origin",
      redirect: "error",
    }).then(function (response) {
      if (!response.ok) {
        return false;
      }
      return response.text().then(function (html) {
        el.innerHTML = html;
        el.setAttribute("data-refreshed", String(Date.now()));
        return true;
      });
    }).catch(function () {
      return true; // the console restarting: try again next time
    });
  }

  function loop(el) {
    window.setTimeout(function () {
      refresh(el).then(function (again) {
        if (again) {
          loop(el);
        }
      });
    }, period);
  }

  document.querySelectorAll("[data-refresh]").forEach(loop);
})();
