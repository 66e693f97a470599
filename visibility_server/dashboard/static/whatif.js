// queuescope dashboard, the what-if form (docs/dashboard.md#what-if-form): paste a Job or
// Workload, pick a LocalQueue, and see what the next scheduling cycle would do with it.
// The form POSTs to the visibility API's own `whatif` subresource on this server, with the
// browser's client certificate, so RBAC decides exactly as it does for kubectl.
"use strict";

(() => {
  const GROUP = "/apis/visibility.kueue.x-k8s.io/v1beta2";
  const byId = (id) => document.getElementById(id);

  function node(tag, text, attrs) {
    const element = document.createElement(tag);
    if (text !== undefined && text !== null) element.textContent = String(text);
    for (const [key, value] of Object.entries(attrs || {})) element.setAttribute(key, value);
    return element;
  }

  function row(list, label, value) {
    list.append(node("dt", label), node("dd", value, { "data-field": label.toLowerCase() }));
  }

  function flavors(assignment) {
    return (assignment.podSets || [])
      .map((ps) => {
        const usage = ps.resourceUsage || {};
        const parts = Object.keys(ps.flavors)
          .sort()
          .map((r) => `${r}=${ps.flavors[r]} (${usage[r] || "?"})`);
        return `${ps.name} ×${ps.count}: ${parts.join(", ")}`;
      })
      .join("; ");
  }

  function victims(preemption) {
    const named = (preemption.victims || []).map(
      (v) => `${v.namespace}/${v.name} (priority ${v.priority}, ${v.reason})`,
    );
    if (preemption.hiddenVictims) named.push(`${preemption.hiddenVictims} more you may not see`);
    return named.join("; ");
  }

  function start(estimate) {
    if (estimate.p50 === estimate.madeAt && estimate.high === estimate.madeAt) return "now";
    return `about ${estimate.p50} (between ${estimate.low} and ${estimate.high}, ${estimate.method})`;
  }

  function showAnswer(answer) {
    const list = node("dl", null, { "data-testid": "whatif-answer" });
    const wl = answer.workload;
    row(list, "Decision", answer.decision);
    row(list, "Workload", `${wl.namespace}/${wl.name} (priority ${wl.priority})`);
    if (wl.clusterQueueName) row(list, "ClusterQueue", wl.clusterQueueName);
    if ("positionInClusterQueue" in answer) {
      row(
        list,
        "Position",
        `${answer.positionInClusterQueue} of ${answer.pendingWorkloadsInClusterQueue} in the ` +
          `ClusterQueue, ${answer.positionInLocalQueue} of ` +
          `${answer.pendingWorkloadsInLocalQueue} in the LocalQueue`,
      );
    }
    if (answer.assignment && answer.assignment.podSets.length) {
      row(list, "Flavors", flavors(answer.assignment));
    }
    if (answer.borrowing && answer.borrowing.length) {
      row(list, "Borrowing", answer.borrowing.map((b) => `${b.amount} ${b.resource} (${b.flavor})`).join(", "));
    }
    if (answer.preemption) row(list, "Preempts", victims(answer.preemption));
    if (answer.pendingReason && answer.pendingReason.message) row(list, "Why", answer.pendingReason.message);
    if (answer.estimatedStart) row(list, "Start", start(answer.estimatedStart));
    return list;
  }

  function showError(status, body) {
    const box = node("div", null, { class: "whatif-error", "data-testid": "whatif-error" });
    box.append(node("p", `${status}: ${body.message || "the request failed"}`));
    const causes = (body.details && body.details.causes) || [];
    if (causes.length) {
      const list = node("ul");
      for (const c of causes) list.append(node("li", `${c.field}: ${c.message}`));
      box.append(list);
    }
    return box;
  }

  async function submit(event) {
    event.preventDefault();
    const out = byId("whatif-result");
    const lq = byId("whatif-localqueue").value.trim();
    const [namespace, name] = lq.includes("/") ? lq.split("/", 2) : ["", lq];
    if (!namespace || !name) {
      out.replaceChildren(node("p", "Give the LocalQueue as namespace/name."));
      return;
    }
    out.replaceChildren(node("p", "asking…"));
    const url = `${GROUP}/namespaces/${encodeURIComponent(namespace)}/localqueues/${encodeURIComponent(name)}/whatif`;
    let response;
    try {
      response = await fetch(url, {
        method: "POST",
        headers: { "Content-Type": "application/yaml", Accept: "application/json" },
        body: byId("whatif-body").value,
        credentials: "same-origin",
        cache: "no-store",
      });
    } catch (error) {
      out.replaceChildren(node("p", `the server could not be reached: ${error}`));
      return;
    }
    let body = {};
    try {
      body = await response.json();
    } catch (_) {
      /* not JSON */
    }
    out.replaceChildren(response.ok ? showAnswer(body) : showError(response.status, body));
  }

  function init() {
    const form = byId("whatif-form");
    if (!form) return;
    const lq = new URLSearchParams(location.search).get("localQueue");
    if (lq) byId("whatif-localqueue").value = lq;
    form.addEventListener("submit", submit);
  }

  init();
})();
