// My work, live: the server pushes each change of the person's tasks and
// runs over /portal/work/events (Server-Sent Events); this updates the row's
// status, message and outcome in place, and drops the cancel button of what
// ended. This is the portal's only script.
(function () {
  'use strict';
  var live = document.getElementById('live');
  var ended = { completed: 1, failed: 1, cancelled: 1, succeeded: 1 };
  function setText(row, selector, text) {
    var cell = row.querySelector(selector);
    if (cell) cell.textContent = text || '';
  }
  function show(change) {
    var selector = change.kind === 'run' ? 'tr[data-run-id]' : 'tr[data-task-id]';
    var rows = document.querySelectorAll(selector);
    var row = null;
    for (var i = 0; i < rows.length; i++) {
      var id = rows[i].getAttribute(change.kind === 'run' ? 'data-run-id' : 'data-task-id');
      if (id === change.id) row = rows[i];
    }
    if (!row) return;
    setText(row, '.status', change.status);
    if (change.kind !== 'run') setText(row, '.message', change.message);
    if (change.outcome) {
      var cell = row.querySelector('.outcome');
      if (cell) {
        var pre = document.createElement('pre');
        pre.textContent = change.outcome;
        cell.textContent = '';
        cell.appendChild(pre);
      }
    }
    if (ended[change.status]) {
      var actions = row.querySelector('.actions');
      if (actions) actions.textContent = '';
    }
  }
  // Only what still runs is followed; the server drops ids not the person's.
  function running(attribute) {
    var ids = [];
    var rows = document.querySelectorAll('tr[' + attribute + ']');
    for (var i = 0; i < rows.length && ids.length < 100; i++) {
      var status = rows[i].querySelector('.status');
      if (status && !ended[status.textContent]) ids.push(rows[i].getAttribute(attribute));
    }
    return ids.join(',');
  }
  var tasks = running('data-task-id');
  var runs = running('data-run-id');
  if (!window.EventSource || (!tasks && !runs)) {
    live.setAttribute('data-state', 'idle');
    return;
  }
  var source = new EventSource('/portal/work/events?tasks=' + encodeURIComponent(tasks) +
    '&runs=' + encodeURIComponent(runs));
  source.addEventListener('open', function () { live.setAttribute('data-state', 'open'); });
  source.addEventListener('error', function () { live.setAttribute('data-state', 'reconnecting'); });
  source.addEventListener('change', function (event) {
    try { show(JSON.parse(event.data)); } catch (e) { /* a malformed event changes nothing */ }
  });
})();
