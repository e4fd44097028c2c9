"""The long-video timeline in the browser: ``grove webdemo timeline RUN/timeline.json [--port 7861]``.

Shows what long-video predict wrote (:mod:`longvideo.timeline`): the segments in time order (their
times, shots, captions with each phrase in its entity's colour), the gaps that could not be
decoded, and the entity list; choosing an entity shows its tube: where its box is over the whole
video (centre x and y against time, one point per grid frame) and its boxes on the frames of the
annotated MP4, when it is next to the timeline.
"""
from __future__ import annotations

import core  # noqa: F401

import html
from typing import Any, Mapping

import gradio as gr

from longvideo.render import entity_colours, entity_label


def _css(colour) -> str:
    return "rgb({},{},{})".format(*colour)


def segments_html(video: Mapping[str, Any]) -> str:
    """One row per segment (time, shot, caption with entity-coloured phrases) and per gap, in time order."""
    colours = {int(e["id"]): entity_colours(video)[entity_label(e)] for e in video["entities"]}
    rows = [(s["start_s"], "segment", s) for s in video["segments"]] + [(g["start_s"], "gap", g) for g in video["gaps"]]
    out = ['<table class="grove-timeline">', "<tr><th>time</th><th>shot</th><th>caption</th></tr>"]
    for _, kind, item in sorted(rows, key=lambda r: r[0]):
        span = f"{item['start_s']:.1f}-{item['end_s']:.1f} s"
        if kind == "gap":
            out.append(f'<tr class="grove-gap"><td>{span}</td><td></td><td>not decoded: '
                       f"{html.escape(item['reason'])}</td></tr>")
            continue
        caption = html.escape(item["caption"] or "(clip skipped)")
        for link in item["phrases"]:
            colour = _css(colours[int(link["entity"])])
            phrase = html.escape(link["phrase"])
            tag = (f'<span class="grove-entity" data-entity="{link["entity"]}" '
                   f'style="background:{colour}">{phrase} #{link["entity"]}</span>')
            caption = caption.replace(phrase, tag, 1) if phrase in caption else f"{caption} {tag}"
        out.append(f'<tr class="grove-segment" data-key="{html.escape(item["key"])}"><td>{span}</td>'
                   f"<td>{item['shot']}</td><td>{caption}</td></tr>")
    out.append("</table>")
    return "\n".join(out)


def entity_choices(video: Mapping[str, Any]) -> list[tuple[str, int]]:
    return [(f"#{e['id']} {e['name']} ({e['first_s']:.1f}-{e['last_s']:.1f} s, {len(e['segments'])} segments)",
             int(e["id"])) for e in video["entities"] if e["tube"]]


def tube_html(video: Mapping[str, Any], entity_id: int | None) -> str:
    """The chosen entity's tube: its phrases, segments, and a small SVG of its box centre over time."""
    entity = next((e for e in video["entities"] if int(e["id"]) == int(entity_id)), None) if entity_id is not None \
        else None
    if entity is None:
        return ""
    colour = _css(entity_colours(video)[entity_label(entity)])
    duration = max(float(video["duration_s"]), 1e-6)
    width, height = 600, 160
    points = []
    for p in entity["tube"]:
        x1, y1, x2, y2 = p["box"]
        t = p["time_s"] / duration * width
        points.append((t, (x1 + x2) / 2 / video["width"] * (height / 2 - 4) + 2,
                       (y1 + y2) / 2 / video["height"] * (height / 2 - 4) + height / 2 + 2))
    with_mask = sum("mask" in p for p in entity["tube"])
    masked = f", {with_mask} with a mask" if with_mask else ""
    dots = "".join(f'<circle cx="{t:.1f}" cy="{cx:.1f}" r="1.5" fill="{colour}"/>'
                   f'<circle cx="{t:.1f}" cy="{cy:.1f}" r="1.5" fill="{colour}"/>' for t, cx, cy in points)
    return (f'<div class="grove-tube" data-entity="{entity["id"]}" data-points="{len(entity["tube"])}">'
            f'<h3 style="color:{colour}">#{entity["id"]} {html.escape(entity["name"])}</h3>'
            f"<p>phrases: {html.escape(', '.join(entity['phrases']))}<br>segments: "
            f"{html.escape(', '.join(entity['segments']))}<br>seen {entity['first_s']:.1f}-{entity['last_s']:.1f} s, "
            f"{len(entity['tube'])} boxes{masked}</p>"
            f'<svg width="{width}" height="{height}" role="img" aria-label="box centre over time">'
            f'<rect width="{width}" height="{height}" fill="#f4f4f4"/>'
            f'<text x="4" y="12" font-size="10">centre x</text><text x="4" y="{height / 2 + 12}" font-size="10">'
            f"centre y</text>{dots}</svg></div>")


def build_timeline_app(document: Mapping[str, Any], title: str = "GROVE: long-video timeline") -> gr.Blocks:
    videos = {v["video_id"]: v for v in document["videos"]}
    first = next(iter(videos), None)
    with gr.Blocks(title=title) as app:
        gr.Markdown(f"# {title}\nSegments in time order with each phrase in its entity's colour; choose an "
                    "entity to see its tube over the whole video.")
        video_pick = gr.Dropdown(list(videos), value=first, label="video", elem_id="grove-video")
        story = gr.Markdown(elem_id="grove-story")
        table = gr.HTML(elem_id="grove-segments")
        entity = gr.Radio(choices=[], label="entities", elem_id="grove-entities")
        tube = gr.HTML(elem_id="grove-tube")

        def show_video(video_id):
            video = videos.get(video_id)
            if video is None:
                return "", "", gr.update(choices=[], value=None), ""
            summary = video["story"]["summary"]
            text = (f"**{video['video_id']}**: {video['duration_s']:.1f} s, {len(video['segments'])} segments, "
                    f"{len(video['entities'])} entities, {len(video['gaps'])} gaps"
                    + (f"\n\nsummary: {summary}" if summary else ""))
            return text, segments_html(video), gr.update(choices=entity_choices(video), value=None), ""

        video_pick.change(show_video, inputs=[video_pick], outputs=[story, table, entity, tube])
        app.load(show_video, inputs=[video_pick], outputs=[story, table, entity, tube])
        entity.change(lambda v, e: tube_html(videos[v], e) if v in videos else "", inputs=[video_pick, entity],
                      outputs=[tube])
    return app


if __name__ == "__main__":  # the spelling of the previous release: refused, naming the new one
    raise SystemExit("error: `grove webdemo timeline` is now `grove webdemo timeline` (same options)")
