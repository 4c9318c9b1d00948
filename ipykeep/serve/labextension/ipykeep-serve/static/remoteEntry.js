/*
 * ipykeep-serve: a prebuilt JupyterLab / Notebook 7 extension, hand-written (no build step) as a
 * module-federation container: `_JUPYTERLAB[name]` with `init(shareScope)` and `get(module)`.
 *
 * ipykeep owns the kernels its Jupyter server hosts, so the server refuses a restart with 403 and
 * a message saying why. JupyterLab swallows that error (SessionContext.restartKernel logs it to
 * the console) and leaves the kernel's status at "restarting" until the next status message,
 * i.e. forever for an idle kernel; messages sent meanwhile stay queued. This plugin shows the
 * server's message in a dialog, reconnects (which flushes the queue) and asks the kernel for a
 * silent, empty execution so that it publishes its status again.
 * It uses the app's own shared @jupyterlab/services and @jupyterlab/apputils.
 *
 * A second plugin marks each code cell with ipykeep's view of it (fresh, stale, blocked,
 * running, paused), the reason as the prompt's hover text: once a second it asks the server's
 * GET /ipykeep/cells for each visible notebook and sets a class ipykeep-<state> on the cell's
 * node, by cell id (JupyterLab's cell model id is the nbformat cell id ipykeep names cells by).
 */
(function () {
  var NAME = "ipykeep-serve";
  var shareScope = null;

  function shared(pkg) {
    var versions = shareScope && shareScope[pkg];
    if (!versions) {
      return Promise.resolve(null);
    }
    var keys = Object.keys(versions);
    var loaded = keys.filter(function (k) { return versions[k].loaded; });
    var key = (loaded.length ? loaded : keys)[0];
    return Promise.resolve(versions[key].get()).then(function (factory) { return factory(); });
  }

  function kernelsWithId(app, kernelId) {
    var found = [];
    var widgets = app.shell.widgets ? app.shell.widgets("main") : [];
    for (var w of widgets) {
      var kernel = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
      if (kernel && kernel.id === kernelId && found.indexOf(kernel) < 0) {
        found.push(kernel);
      }
    }
    return found;
  }

  function settle(app, kernelId) {
    kernelsWithId(app, kernelId).forEach(function (kernel) {
      // Messages JupyterLab sent while it thought the kernel was restarting (the debugger's,
      // the user's next cell) wait in a queue that only a new connection flushes: reconnect,
      // then have the kernel publish its status with a silent, empty execution.
      Promise.resolve(kernel.reconnect()).then(function () {
        var future = kernel.requestExecute({ code: "", silent: true, store_history: false, allow_stdin: false, stop_on_error: false });
        future.done.then(function () { future.dispose(); }, function () { future.dispose(); });
      }).catch(function (err) {
        console.warn("ipykeep-serve: could not refresh the kernel connection", err);
      });
    });
  }

  var RESTART = /\/api\/kernels\/([^/?#]+)\/restart(?:[?#]|$)/;

  var plugin = {
    id: "ipykeep-serve:refused-restart",
    description: "Shows why ipykeep refused a kernel restart and clears the 'Restarting' status.",
    autoStart: true,
    activate: function (app) {
      return Promise.all([shared("@jupyterlab/services"), shared("@jupyterlab/apputils")]).then(function (mods) {
        var services = mods[0];
        var apputils = mods[1];
        if (!services || !services.ServerConnection) {
          console.warn("ipykeep-serve: @jupyterlab/services is not shared; refused restarts stay silent");
          return;
        }
        var SC = services.ServerConnection;
        var makeRequest = SC.makeRequest;
        SC.makeRequest = function (url, init, settings) {
          return makeRequest.call(this, url, init, settings).then(function (response) {
            var match = RESTART.exec(String(url));
            if (match && response.status === 403) {
              response.clone().json().catch(function () { return {}; }).then(function (body) {
                var message = (body && body.message) || "ipykeep refused to restart this kernel.";
                if (apputils && apputils.showErrorMessage) {
                  apputils.showErrorMessage("Kernel restart refused", message);
                } else {
                  window.alert(message);
                }
                // after SessionContext.restartKernel has handled the failure
                setTimeout(function () { settle(app, decodeURIComponent(match[1])); }, 300);
              });
            }
            return response;
          });
        };
      });
    },
  };

  var MARK_STATES = ["fresh", "stale", "blocked", "running", "paused"];
  var POLL_MS = 1000;
  var MARK_CSS = [
    ".jp-CodeCell.ipykeep-fresh .jp-InputPrompt { box-shadow: inset 3px 0 0 #2e7d32; }",
    ".jp-CodeCell.ipykeep-stale .jp-InputPrompt { box-shadow: inset 3px 0 0 #d08a00; }",
    ".jp-CodeCell.ipykeep-blocked .jp-InputPrompt { box-shadow: inset 3px 0 0 #c62828; }",
    ".jp-CodeCell.ipykeep-running .jp-InputPrompt { box-shadow: inset 3px 0 0 #1565c0; }",
    ".jp-CodeCell.ipykeep-paused .jp-InputPrompt { box-shadow: inset 3px 0 0 #6a1b9a; }",
    // Outputs of a cell that must re-run are out of date: faded, as marimo shows stale cells.
    ".jp-CodeCell.ipykeep-stale .jp-OutputArea, .jp-CodeCell.ipykeep-blocked .jp-OutputArea { opacity: 0.55; }",
    ".jp-CodeCell[data-ipykeep-state] .jp-InputPrompt { cursor: help; }",
    ".jp-CodeCell.ipykeep-stale .jp-InputPrompt::after, .jp-CodeCell.ipykeep-blocked .jp-InputPrompt::after,",
    ".jp-CodeCell.ipykeep-running .jp-InputPrompt::after, .jp-CodeCell.ipykeep-paused .jp-InputPrompt::after {",
    "  content: attr(data-ipykeep-state); display: block; font-size: 9px; line-height: 1.2; }",
    ".jp-CodeCell.ipykeep-stale .jp-InputPrompt::after { color: #d08a00; }",
    ".jp-CodeCell.ipykeep-blocked .jp-InputPrompt::after { color: #c62828; }",
    ".jp-CodeCell.ipykeep-running .jp-InputPrompt::after { color: #1565c0; }",
    ".jp-CodeCell.ipykeep-paused .jp-InputPrompt::after { color: #6a1b9a; }",
  ].join("\n");

  function notebookPanels(app) {
    var widgets = app.shell.widgets ? app.shell.widgets("main") : [];
    var panels = [];
    for (var w of widgets) {
      if (w && w.isVisible && w.context && w.context.path && w.content && w.content.widgets) {
        panels.push(w);
      }
    }
    return panels;
  }

  function applyMarks(panel, marks) {
    var byId = {};
    marks.forEach(function (m) { byId[m.id] = m; });
    panel.content.widgets.forEach(function (cell) {
      var node = cell.node;
      var mark = cell.model && byId[cell.model.id];
      var state = mark ? mark.state : null;
      MARK_STATES.forEach(function (s) { node.classList.toggle("ipykeep-" + s, s === state); });
      // The prompt's text is rewritten by JupyterLab; its attributes are left alone.
      var prompt = node.querySelector(".jp-InputPrompt");
      if (mark) {
        node.setAttribute("data-ipykeep-state", mark.state);
        node.setAttribute("data-ipykeep-reason", mark.title);
        if (prompt) {
          prompt.setAttribute("data-ipykeep-state", mark.state);
          prompt.setAttribute("title", mark.title);
        }
      } else if (node.hasAttribute("data-ipykeep-state")) {
        node.removeAttribute("data-ipykeep-state");
        node.removeAttribute("data-ipykeep-reason");
        if (prompt) {
          prompt.removeAttribute("data-ipykeep-state");
          prompt.removeAttribute("title");
        }
      }
    });
  }

  function fetchMarks(SC, settings, path) {
    var url = settings.baseUrl + "ipykeep/cells?path=" + encodeURIComponent(path);
    return SC.makeRequest(url, { method: "GET" }, settings).then(function (response) {
      // Not served by ipykeep's kernel, or the daemon is away: no marks rather than old ones.
      return response.ok ? response.json().then(function (body) { return body.cells || []; }) : [];
    });
  }

  var marksPlugin = {
    id: "ipykeep-serve:cell-marks",
    description: "Marks each cell fresh, stale, blocked, running or paused as ipykeep sees it.",
    autoStart: true,
    activate: function (app) {
      return shared("@jupyterlab/services").then(function (services) {
        if (!services || !services.ServerConnection) {
          console.warn("ipykeep-serve: @jupyterlab/services is not shared; no cell marks");
          return;
        }
        var SC = services.ServerConnection;
        var settings = SC.makeSettings();
        var style = document.createElement("style");
        style.id = "ipykeep-cell-marks";
        style.textContent = MARK_CSS;
        document.head.appendChild(style);
        function poll() {
          var panels = document.hidden ? [] : notebookPanels(app);
          Promise.all(panels.map(function (panel) {
            return fetchMarks(SC, settings, panel.context.path).then(function (marks) {
              applyMarks(panel, marks);
            });
          })).catch(function (err) {
            console.warn("ipykeep-serve: could not read cell marks", err);
          }).then(function () {
            // The next poll starts after this one ends, so a slow daemon never piles them up.
            setTimeout(poll, POLL_MS);
          });
        }
        poll();
      });
    },
  };

  var modules = {
    "./extension": function () { return { __esModule: true, default: [plugin, marksPlugin] }; },
  };

  window._JUPYTERLAB = window._JUPYTERLAB || {};
  window._JUPYTERLAB[NAME] = {
    init: function (scope) {
      shareScope = scope;
    },
    get: function (module) {
      var factory = modules[module];
      if (!factory) {
        return Promise.reject(new Error("ipykeep-serve has no module " + module));
      }
      return Promise.resolve(factory);
    },
  };
})();
