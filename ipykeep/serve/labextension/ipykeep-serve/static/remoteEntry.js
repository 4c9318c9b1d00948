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

  var modules = { "./extension": function () { return { __esModule: true, default: [plugin] }; } };

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
