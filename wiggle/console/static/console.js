// Live refresh for the Wiggle console: every element with data-refresh="URL" is re-fetched
// (same URL, header X-Wiggle-Fragment: 1, which answers only that part) and replaced, while
// the tab is visible. It stops once the part says data-finished.
//
// A fetch that fails (the console or its server restarting, a 5xx) does not end the refresh:
// the part is marked stale ("not refreshed since ...") and tried again, backing off up to
// MAX_RETRY_MS, until an answer comes; then the mark goes. Only a logged-out session (401) or
// an instance that is gone (404) stops it, saying so.
//
// A part may hold a section marked data-keep="KEY" (the instance's actions): while the new
// part holds one with the same key, the one on the page stays where it is and everything
// around it is replaced, so text being typed in its forms keeps its text and its focus; when
// the key changes or the section goes (the instance ended), it is replaced or removed. No
// inline script: the CSP forbids it.
//
// The reset picker: a click on a node of an instance's graph picks that node in the reset
// form's list (#reset-node) when a reset can go there, or says why not (the reasons the page
// lists in #reset-why-not); the picked node is outlined on the graph, across refreshes too.
(function () {
  "use strict";
  var body = document.body;
  var period = Number(body.getAttribute("data-refresh-ms")) || 2000;
  var MAX_RETRY_MS = Math.max(period, 3000);
  body.setAttribute("data-max-retry-ms", String(MAX_RETRY_MS));

  function finished(el) {
    return el.querySelector("[data-finished]") !== null;
  }

  function clock(date) {
    return date.toTimeString().slice(0, 8);
  }

  function banner(el) {
    var note = el.previousElementSibling;
    if (note === null || !note.classList.contains("stale-note")) {
      note = document.createElement("p");
      note.className = "stale-note";
      note.setAttribute("role", "status");
      el.parentNode.insertBefore(note, el);
    }
    return note;
  }

  function stale(el, text) {
    if (!el.hasAttribute("data-stale")) {
      el.setAttribute("data-stale", el.getAttribute("data-refreshed") || String(Date.now()));
    }
    var since = new Date(Number(el.getAttribute("data-stale")));
    banner(el).textContent = "Not up to date: last refreshed at " + clock(since) + ". " + text;
  }

  function fresh(el) {
    el.removeAttribute("data-stale");
    var note = el.previousElementSibling;
    if (note !== null && note.classList.contains("stale-note")) {
      note.remove();
    }
  }

  function chain(node, top) {
    var path = [];
    while (node !== top) {
      path.unshift(node);
      node = node.parentNode;
    }
    return path;
  }

  function siblingsAround(node) {
    var before = [];
    var after = [];
    for (var n = node.previousSibling; n !== null; n = n.previousSibling) {
      before.unshift(n);
    }
    for (n = node.nextSibling; n !== null; n = n.nextSibling) {
      after.push(n);
    }
    return [before, after];
  }

  // Makes `el` show `incoming`, leaving `kept` (inside el) where it is, in place of its twin
  // (inside incoming): everything around it, at every level up to el, is replaced. The kept
  // node is never moved, so the field being typed in keeps its text and its focus.
  function graft(el, incoming, kept, twin) {
    var old = chain(kept, el);
    var fresh = chain(twin, incoming);
    if (old.length !== fresh.length) {
      return false;
    }
    var parent = el;
    for (var i = 0; i < old.length; i += 1) {
      var stay = old[i];
      var around = siblingsAround(fresh[i]);
      while (stay.previousSibling !== null) {
        stay.previousSibling.remove();
      }
      while (stay.nextSibling !== null) {
        stay.nextSibling.remove();
      }
      around[0].forEach(function (n) { parent.insertBefore(n, stay); });
      around[1].forEach(function (n) { parent.appendChild(n); });
      if (i < old.length - 1) { // a container on the way: take its new attributes
        Array.prototype.slice.call(stay.attributes).forEach(function (a) {
          stay.removeAttribute(a.name);
        });
        Array.prototype.slice.call(fresh[i].attributes).forEach(function (a) {
          stay.setAttribute(a.name, a.value);
        });
      }
      parent = stay;
    }
    return true;
  }

  function swap(el, html) {
    var incoming = document.createElement("div");
    incoming.innerHTML = html;
    var kept = el.querySelector("[data-keep]");
    var twin = kept === null ? null : incoming.querySelector(
      '[data-keep="' + CSS.escape(kept.getAttribute("data-keep")) + '"]');
    if (twin === null || twin.id !== kept.id || !graft(el, incoming, kept, twin)) {
      el.replaceChildren.apply(el, Array.prototype.slice.call(incoming.childNodes));
    }
    el.setAttribute("data-refreshed", String(Date.now()));
    markPicked();
  }

  // Resolves to the delay before the next try, or -1 to stop.
  function refresh(el) {
    if (finished(el)) {
      return Promise.resolve(-1);
    }
    if (document.hidden) {
      return Promise.resolve(period);
    }
    return fetch(el.getAttribute("data-refresh"), {
      headers: { "X-Wiggle-Fragment": "1" },
      credentials: "same-origin",
      redirect: "error",
      cache: "no-store",
    }).then(function (response) {
      if (response.status === 401) {
        stale(el, "Your session ended: reload the page to log in again.");
        return -1;
      }
      if (response.status === 404) {
        stale(el, "It is gone from the server (pruned?).");
        return -1;
      }
      if (!response.ok) {
        throw new Error("the console answered " + response.status);
      }
      return response.text().then(function (html) {
        swap(el, html);
        fresh(el);
        return period;
      });
    }).catch(function () {
      stale(el, "The console cannot reach the Wiggle server right now; trying again.");
      return null;
    });
  }

  function loop(el, delay, failures) {
    window.setTimeout(function () {
      refresh(el).then(function (next) {
        if (next === -1) {
          return;
        }
        if (next === null) {
          failures += 1;
          loop(el, Math.min(MAX_RETRY_MS, period * Math.pow(2, failures - 1)), failures);
        } else {
          loop(el, next, 0);
        }
      });
    }, delay);
  }

  function markPicked() {
    var select = document.getElementById("reset-node");
    document.querySelectorAll("svg.flow-graph g.node.picked").forEach(function (g) {
      g.classList.remove("picked");
    });
    if (select === null || !select.value) {
      return;
    }
    document.querySelectorAll("svg.flow-graph g.node").forEach(function (g) {
      if (g.getAttribute("data-node") === select.value) {
        g.classList.add("picked");
      }
    });
  }

  function pick(node) {
    var select = document.getElementById("reset-node");
    var note = document.getElementById("reset-pick-note");
    if (select === null || note === null) {
      return;
    }
    var id = node.getAttribute("data-node");
    var offered = Array.prototype.some.call(select.options, function (o) {
      return o.value !== "" && o.value === id;
    });
    if (offered) {
      select.value = id;
      note.textContent = "Picked " + id + " on the graph.";
    } else {
      select.value = "";
      var why = null;
      document.querySelectorAll("#reset-why-not [data-node]").forEach(function (s) {
        if (s.getAttribute("data-node") === id) {
          why = s.textContent;
        }
      });
      note.textContent = id + ": " + (why || "a reset cannot go there");
    }
    markPicked();
  }

  document.addEventListener("click", function (event) {
    var node = event.target.closest ? event.target.closest("svg.flow-graph g.node[data-node]") : null;
    if (node !== null && document.getElementById("reset-node") !== null) {
      pick(node);
    }
  });
  document.addEventListener("change", function (event) {
    if (event.target.id === "reset-node") {
      markPicked();
    }
  });

  document.querySelectorAll("[data-refresh]").forEach(function (el) {
    loop(el, period, 0);
  });
})();
