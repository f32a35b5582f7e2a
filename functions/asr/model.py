"""Speech recognition: PocketSphinx 5 with the US English acoustic model, language model and
dictionary that the ``pocketsphinx`` package ships.

Input: ``{"b64": base64 of a WAV file}``, mono 16-bit PCM at 16 kHz, at most 30 s; other
rates, widths or channel counts are rejected with the reason. Output: ``{"text": str}``.
PocketSphinx decodes one utterance at a time on one thread, so a batch costs the sum of its
utterances. Sample clips (``samples/*.wav``) were synthesised with Piper's en_US "joe" voice,
resampled to 16 kHz, once, when they were made (Piper is not a dependency);
``samples/transcripts.json`` holds the sentences spoken, which PocketSphinx reads back exactly.
"""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any

from functions.inputs import Audio, b64_encode, b64_field, wav_audio
from functions.model import Model
from functions.tensors import TensorSpec

SAMPLE_RATE = 16000
MAX_DURATION_S = 30.0
_SAMPLES = files("functions.asr") / "samples"


def sample_transcripts() -> dict[str, str]:
    """Sample file name -> the sentence spoken in it."""
    transcripts: dict[str, str] = json.loads(
        (_SAMPLES / "transcripts.json").read_text(encoding="utf-8")
    )
    return transcripts


def sample_wav(name: str) -> bytes:
    """The bytes of one bundled sample clip."""
    return (_SAMPLES / name).read_bytes()


class SpeechRecognizer(Model):
    kind = "asr"
    input = TensorSpec("input-0", "BYTES", (-1,), records=True)
    outputs = (TensorSpec("text", "BYTES", (-1,), "text"),)
    summary = "PocketSphinx 5 US English speech to text (16 kHz mono WAV)"
    max_instances = 64

    def load(self) -> None:
        from pocketsphinx import Decoder

        self._decoder = Decoder(samprate=SAMPLE_RATE, loglevel="FATAL")

    def validate(self, instance: Any) -> Any:
        return wav_audio(
            b64_field(instance), sample_rate=SAMPLE_RATE, max_duration_s=MAX_DURATION_S
        )

    def predict(self, batch: list[Any]) -> list[Any]:
        clips: list[Audio] = batch
        results = []
        for clip in clips:
            self._decoder.start_utt()
            self._decoder.process_raw(clip.pcm, full_utt=True)
            self._decoder.end_utt()
            hypothesis = self._decoder.hyp()
            results.append({"text": hypothesis.hypstr if hypothesis is not None else ""})
        return results

    def sample_instances(self, n: int) -> list[Any]:
        encoded = [b64_encode(sample_wav(name)) for name in sorted(sample_transcripts())]
        return [encoded[i % len(encoded)] for i in range(n)]
