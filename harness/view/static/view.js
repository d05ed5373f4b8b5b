// harness view: the annotation queue's keys and the judge-score toggle. Talks to this server only.
(function () {
  "use strict";
  var item = document.getElementById("item");
  var show = document.getElementById("show-judge");
  var score = document.getElementById("judge-score");
  function toggleJudge() {
    if (!score) return;
    score.hidden = !score.hidden;
    if (show) show.textContent = score.hidden ? "show the judge's score" : "hide the judge's score";
  }
  if (show) show.addEventListener("click", toggleJudge);
  if (!item) return;
  var status = document.getElementById("status");
  var busy = false;
  function go(unit) {
    var url = new URL(window.location.href);
    url.searchParams.set("annotator", item.dataset.annotator);
    if (unit === null) url.searchParams.delete("unit"); else url.searchParams.set("unit", unit);
    window.location.assign(url.toString());
  }
  function give(value) {
    if (busy) return;
    busy = true;
    status.textContent = "saving…";
    fetch("/queue/label", {
      method: "POST",
      headers: {"Content-Type": "application/json"},
      body: JSON.stringify({r: item.dataset.run, annotator: item.dataset.annotator, transcript_id: item.dataset.transcript,
                            rubric: item.dataset.rubric,
                            // a categorical rubric's label is saved as written; a scale's as the number
                            label: item.dataset.kind === "categorical" ? value : Number(value)})
    }).then(function (response) {
      if (!response.ok) return response.text().then(function (t) { throw new Error(t.replace(/<[^>]*>/g, " ").trim()); });
      return response.json();
    }).then(function () {
      status.textContent = "saved";
      go(item.dataset.next === "" ? null : item.dataset.next);
    }).catch(function (e) {
      busy = false;
      status.textContent = "not saved: " + e.message;
    });
  }
  Array.prototype.forEach.call(document.querySelectorAll(".choice"), function (b) {
    b.addEventListener("click", function () { give(b.dataset.value); });
  });
  document.addEventListener("keydown", function (e) {
    if (e.target && (e.target.tagName === "INPUT" || e.target.tagName === "TEXTAREA")) return;
    var choice = document.querySelector('.choice[data-key="' + e.key + '"]');
    if (choice) { e.preventDefault(); give(choice.dataset.value); return; }
    if (e.key === "ArrowRight" && item.dataset.next !== "") go(item.dataset.next);
    else if (e.key === "ArrowLeft" && item.dataset.prev !== "") go(item.dataset.prev);
    else if (e.key === "j") toggleJudge();
  });
})();
