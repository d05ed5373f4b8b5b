"""The viewer's web app (Flask): routes that read the runs under one folder and render templates.

Every page is rendered on the server from Jinja2 templates with autoescaping on, so no text a
transcript holds is ever markup; every element showing such text has ``dir="auto"`` so
right-to-left and mixed text lays out as written. The only JavaScript (static/view.js) is the
annotation queue's keys and the judge-score toggle; it fetches nothing but this server. Runs are
named by their path under the root, looked up in the list of runs found there, never joined onto
a path, so no request reaches a file outside the root. The app writes nothing but the annotators'
labels files of a queue.
"""

from __future__ import annotations

import math
import shutil
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flask import Flask, abort, jsonify, render_template, request
from jinja2 import FileSystemBytecodeCache

from ..errors import HarnessError, UserInputError
from ..outputs.layout import usd as layout_usd
from ..rows import ROW_FILES
from .index import index_dir
from .queue import Queue, choices, find_queue, label_rows, open_queue
from .runs import OpenedRun, RunEntry, find_runs, open_viewed_run, stamp
from .table import table_page

if TYPE_CHECKING:
    from .compare import SideBySide


def fmt(value: Any, digits: int = 3) -> str:
    """A number as the pages show it: up to ``digits`` decimals, — for none."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        if value.is_integer() and abs(value) < 1e15:
            return f"{int(value):,}"
        return f"{value:.{digits}f}".rstrip("0").rstrip(".")
    return str(value)


def usd(value: float | None) -> str:
    """Dollars as the terminal tables show them (``outputs.layout.usd``): unknown stays unknown."""
    return layout_usd(value)


class Viewer:
    """The state behind the app: the root, the runs opened so far, the queues opened so far."""

    def __init__(self, root: Path, annotators: Sequence[str] = (), overlap: int = 1, prompts: Sequence[str | Path] = ()) -> None:
        self.root = root
        self.prompts = tuple(Path(p) for p in prompts)
        self.annotators = tuple(annotators)
        self.overlap = overlap
        self.scratch = Path(tempfile.mkdtemp(prefix="harness-view-"))
        self._opened: dict[Path, tuple[tuple[tuple[str, int, int], ...], OpenedRun]] = {}
        self._queues: dict[Path, Queue] = {}
        self._compared: dict[tuple[Path, Path, int, int], SideBySide] = {}
        self._lock = threading.Lock()

    def runs(self) -> list[RunEntry]:
        return find_runs(self.root)

    def entry(self, name: str | None) -> RunEntry:
        found = next((r for r in self.runs() if r.name == name), None)
        if found is None:
            abort(404, f"no run {name!r} under {self.root}")
        return found

    def opened(self, entry: RunEntry) -> OpenedRun:
        key = stamp(entry.path, ("summary.json", *ROW_FILES))
        with self._lock:
            cached = self._opened.get(entry.path)
            if cached is not None and cached[0] == key:
                return cached[1]
            if cached is not None:
                cached[1].close()
            run = open_viewed_run(entry.path, self.scratch, self.prompts)
            self._opened[entry.path] = (key, run)
            return run

    def compared(self, a: RunEntry, b: RunEntry) -> SideBySide:
        """The two runs compared, worked out once while neither changes."""
        key = (a.path, b.path, id(self.opened(a)), id(self.opened(b)))  # a run re-read is a new object
        from .compare import side_by_side  # imported when two runs are first compared (the analysis modules)

        with self._lock:
            if key not in self._compared:
                self._compared[key] = side_by_side(a.path, b.path, self.prompts)
            return self._compared[key]

    def queue(self, entry: RunEntry) -> Queue | None:
        folder = find_queue(entry.path)
        if folder is None or not self.annotators:
            return None
        with self._lock:
            if folder not in self._queues:
                self._queues[folder] = open_queue(folder, self.annotators, self.overlap, self.prompts)
            return self._queues[folder]

    def served(self) -> None:
        """A page was drawn: an opened run's index check may start (`runs.OpenedRun.served`)."""
        for _, run in list(self._opened.values()):
            run.served.set()

    def settle(self, timeout: float | None = None) -> None:
        """Wait for the opened runs' index checks (tests; a viewer's stop does not wait)."""
        self.served()
        for _, run in list(self._opened.values()):
            if run.indexing is not None:
                run.indexing.join(timeout)

    def close(self) -> None:
        for _, run in self._opened.values():
            run.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


def make_app(root: str | Path, annotators: Sequence[str] = (), overlap: int = 1, prompts: Sequence[str | Path] = ()) -> Flask:
    """The viewer of the runs under ``root``; ``annotators`` and ``overlap`` set up the queues;
    ``prompts``: directories of the runs' custom rubric files (for their scales)."""
    viewer = Viewer(Path(root), annotators, overlap, prompts)
    app = Flask(__name__)
    app.config["VIEWER"] = viewer
    app.jinja_env.autoescape = True
    if (kept := index_dir()) is not None and (folder := _writable(kept / "templates")) is not None:
        # the templates compiled once, kept beside the runs' indexes (jinja names each by its
        # source's hash): compiling run.html was a third of a fresh viewer's first page
        app.jinja_env.bytecode_cache = _Compiled(folder)
    app.jinja_env.filters["fmt"] = fmt
    app.jinja_env.filters["usd"] = usd
    app.jinja_env.globals["root"] = str(viewer.root)

    @app.errorhandler(UserInputError)
    def _bad(exc: UserInputError) -> Any:
        return render_template("error.html", message=str(exc)), 400

    @app.errorhandler(HarnessError)
    def _failed(exc: HarnessError) -> Any:
        return render_template("error.html", message=str(exc)), 500

    @app.errorhandler(404)
    def _missing(exc: Any) -> Any:
        return render_template("error.html", message=getattr(exc, "description", "not found")), 404

    @app.after_request
    def _drawn(response: Any) -> Any:
        viewer.served()
        return response

    @app.get("/favicon.ico")
    def favicon() -> Any:
        return "", 204  # no icon: the browser asks for one anyway

    @app.get("/")
    def runs() -> str:
        entries = viewer.runs()
        return render_template("runs.html", runs=entries, queues={r.name: find_queue(r.path) is not None for r in entries})

    @app.get("/run")
    def run() -> str:
        entry = viewer.entry(request.args.get("r"))
        opened = viewer.opened(entry)
        page = table_page(opened, request.args)
        for at, _ in page.rows:  # the rows shown, validated by their types (the first pass read a few fields)
            opened.check(at)
        if "passk" not in opened.extras:
            if opened.agent_metrics:
                from .agent import passk  # an agent run's (harness.analysis.repeated: numpy)

                opened.extras["passk"] = passk(opened)
            else:
                opened.extras["passk"] = (None, None)
        tasks, why = opened.extras["passk"]
        return render_template(
            "run.html",
            entry=entry,
            run=opened,
            data=opened.data,
            table=page,
            summary=opened.view.summary,
            passk=tasks,
            passk_note=why,
            has_queue=find_queue(entry.path) is not None,
        )

    @app.get("/transcript")
    def transcript() -> str:
        entry = viewer.entry(request.args.get("r"))
        opened = viewer.opened(entry)
        at = _position(opened, request.args)
        opened.check(at)
        from .agent import agent_detail

        return render_template(
            "transcript.html",
            entry=entry,
            run=opened,
            at=at,
            tid=opened.ids[at],
            texts=opened.texts(at),
            judgments=opened.judgments(at),
            chat=opened.chat(at),
            turn=request.args.get("turn", ""),
            row=opened.result(at),
            agent=agent_detail(opened, at),
        )

    @app.get("/compare")
    def compare() -> str:
        a, b = viewer.entry(request.args.get("a")), viewer.entry(request.args.get("b"))
        found = viewer.compared(a, b)
        return render_template("compare.html", a=a, b=b, found=found)

    @app.get("/pair")
    def pair() -> str:
        a, b = viewer.entry(request.args.get("a")), viewer.entry(request.args.get("b"))
        tid = request.args.get("id") or ""
        sides = []
        for entry in (a, b):
            opened = viewer.opened(entry)
            at = opened.position.get(tid)
            if at is not None:
                opened.check(at)
            sides.append(
                {
                    "entry": entry,
                    "at": at,
                    "texts": opened.texts(at) if at is not None else None,
                    "judgments": opened.judgments(at) if at is not None else [],
                }
            )
        return render_template("pair.html", a=a, b=b, tid=tid, sides=sides)

    @app.get("/queue")
    def queue() -> str:
        entry = viewer.entry(request.args.get("r"))
        q = viewer.queue(entry)
        annotator = request.args.get("annotator") or ""
        if q is None:
            return render_template("queue.html", entry=entry, q=None, annotators=viewer.annotators, annotator=annotator)
        unit = None
        mine = q.assigned(annotator) if annotator in q.annotators else []
        given = q.labels.get(annotator, {})
        wanted = request.args.get("unit")
        if wanted is not None and wanted.isdigit():
            unit = next((u for u in mine if u.index == int(wanted)), None)
        if unit is None:
            unit = next((u for u in mine if (u.transcript_id, u.rubric) not in given), None)
        position = mine.index(unit) if unit is not None else None
        return render_template(
            "queue.html",
            entry=entry,
            q=q,
            annotator=annotator,
            annotators=q.annotators,
            mine=mine,
            unit=unit,
            position=position,
            given=given,
            rubric=q.rubrics.get(unit.rubric) if unit else None,
            scale=choices(q.rubrics[unit.rubric]) if unit else [],
            texts=q.texts.get(unit.transcript_id) if unit else None,
            judge_score=q.judge_scores.get((unit.transcript_id, unit.rubric)) if unit else None,
            progress=q.progress(),
            agreement=q.agreement(),
            rows=label_rows(q, annotator) if annotator in q.annotators else [],
        )

    @app.post("/queue/label")
    def label() -> Any:
        body = request.get_json(force=True, silent=True) or {}
        entry = viewer.entry(body.get("r"))
        q = viewer.queue(entry)
        if q is None:
            abort(404, "this run has no annotation queue")
        raw = body.get("label")
        # a number on a scale, or a categorical rubric's label as written (Queue.give checks it is one of the rubric's)
        if isinstance(raw, bool) or not isinstance(raw, int | float | str):
            raise UserInputError(f"label: {raw!r} is not a number or a label")
        q.give(str(body.get("annotator")), str(body.get("transcript_id")), str(body.get("rubric")), raw if isinstance(raw, str) else float(raw))
        return jsonify({"saved": True, "progress": q.progress()})

    return app


class _Compiled(FileSystemBytecodeCache):
    """jinja's compiled templates in a folder; one that cannot be written is only not kept."""

    def dump_bytecode(self, bucket: Any) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:
            pass


def _writable(folder: Path) -> str | None:
    """``folder``, made (None: it cannot be, and the templates are compiled by each viewer)."""
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError:
        return None
    return str(folder)


def _position(run: OpenedRun, args: Any) -> int:
    tid = args.get("id")
    if tid is not None and tid in run.position:
        return run.position[tid]
    at = args.get("at")
    if at is not None and at.isdigit() and int(at) < len(run.ids):
        return int(at)
    abort(404, f"no transcript {tid or at!r} in this run")
