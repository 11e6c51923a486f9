//! The content tools: one per kind of content block a `CallToolResult` can carry,
//! a tool that fails, and a tool that reports progress.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use docket_protocol::tools::{
    BinaryContent, CallToolResult, ContentBlock, EmbeddedResource, ResourceContents,
};
use docket_server::{AppBuilder, ToolCall, ToolError, ToolOutcome, ToolSpec};

use crate::{Registered, no_arguments};

/// Returns one text block.
pub(crate) const SIMPLE_TEXT: &str = "test_simple_text";
/// Returns one image block.
pub(crate) const IMAGE_CONTENT: &str = "test_image_content";
/// Returns one audio block.
pub(crate) const AUDIO_CONTENT: &str = "test_audio_content";
/// Returns one embedded text resource.
pub(crate) const EMBEDDED_RESOURCE: &str = "test_embedded_resource";
/// Returns a text, an image and a resource block together.
pub(crate) const MULTIPLE_CONTENT_TYPES: &str = "test_multiple_content_types";
/// Returns a tool error (`isError: true`).
pub(crate) const ERROR_HANDLING: &str = "test_error_handling";
/// Reports progress three times before answering.
pub(crate) const TOOL_WITH_PROGRESS: &str = "test_tool_with_progress";

/// A 1×1 red RGBA PNG: signature, IHDR, one zlib-compressed IDAT and IEND, each
/// chunk with its correct CRC, so image decoders accept it.
pub(crate) const RED_PIXEL_PNG: [u8; 70] = [
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0xda, 0x63, 0xfc, 0xcf, 0xc0, 0xf0,
    0x1f, 0x00, 0x05, 0x05, 0x02, 0x00, 0x5f, 0xc8, 0xf1, 0xd2, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

/// The sample rate of the generated WAV, in hertz.
const WAV_SAMPLE_RATE_HZ: u32 = 8_000;
/// How many 16-bit samples of silence the generated WAV holds (10 ms).
const WAV_SAMPLE_COUNT: u32 = 80;

/// The pause between two progress reports, so that a client sees them arrive
/// one by one rather than in a single burst.
const PROGRESS_STEP_DELAY: Duration = Duration::from_millis(50);

/// Registers the content, error and progress tools.
pub(crate) fn register(builder: AppBuilder) -> Registered {
    builder
        .tool(
            ToolSpec::new(SIMPLE_TEXT, "Returns a single text content block.", no_arguments()),
            simple_text,
        )?
        .tool(
            ToolSpec::new(IMAGE_CONTENT, "Returns a 1x1 PNG image content block.", no_arguments()),
            image_content,
        )?
        .tool(
            ToolSpec::new(AUDIO_CONTENT, "Returns a short silent WAV audio content block.", no_arguments()),
            audio_content,
        )?
        .tool(
            ToolSpec::new(
                EMBEDDED_RESOURCE,
                "Returns an embedded text resource (test://embedded-resource).",
                no_arguments(),
            ),
            embedded_resource,
        )?
        .tool(
            ToolSpec::new(
                MULTIPLE_CONTENT_TYPES,
                "Returns a text, an image and an embedded resource content block together.",
                no_arguments(),
            ),
            multiple_content_types,
        )?
        .tool(
            ToolSpec::new(
                ERROR_HANDLING,
                "Always fails with a tool error (isError: true) and a text message.",
                no_arguments(),
            ),
            error_handling,
        )?
        .tool(
            ToolSpec::new(
                TOOL_WITH_PROGRESS,
                "Reports progress 0, 50 and 100 of 100 (when the request carries a progressToken), then returns text.",
                no_arguments(),
            ),
            tool_with_progress,
        )
}

async fn simple_text(_call: ToolCall) -> ToolOutcome {
    CallToolResult::text("This is a simple text response for testing.").into()
}

async fn image_content(_call: ToolCall) -> ToolOutcome {
    CallToolResult::from_content(vec![png_block()]).into()
}

async fn audio_content(_call: ToolCall) -> ToolOutcome {
    let audio = BinaryContent {
        data: STANDARD.encode(silent_wav()),
        mime_type: "audio/wav".into(),
        annotations: None,
        meta: None,
    };
    CallToolResult::from_content(vec![ContentBlock::Audio(audio)]).into()
}

async fn embedded_resource(_call: ToolCall) -> ToolOutcome {
    let block = text_resource(
        "test://embedded-resource",
        "text/plain",
        "This is an embedded resource content.",
    );
    CallToolResult::from_content(vec![block]).into()
}

async fn multiple_content_types(_call: ToolCall) -> ToolOutcome {
    CallToolResult::from_content(vec![
        ContentBlock::text("Multiple content types test:"),
        png_block(),
        text_resource(
            "test://mixed-content-resource",
            "application/json",
            r#"{"test":"data","value":123}"#,
        ),
    ])
    .into()
}

async fn error_handling(_call: ToolCall) -> ToolOutcome {
    CallToolResult::error("This tool intentionally returns an error for testing").into()
}

async fn tool_with_progress(call: ToolCall) -> ToolOutcome {
    const TOTAL: u64 = 100;
    for (step, progress) in [0, 50, TOTAL].into_iter().enumerate() {
        if step > 0 {
            // Stop as soon as the client goes away instead of finishing the sleeps.
            tokio::select! {
                () = tokio::time::sleep(PROGRESS_STEP_DELAY) => {}
                () = call.cancel.cancelled() => {
                    return ToolOutcome::Error(ToolError::Internal("the call was cancelled".into()));
                }
            }
        }
        call.progress.report(
            progress,
            Some(TOTAL),
            Some(format!("step {} of 3", step + 1)),
        );
    }
    CallToolResult::text("Progress test completed: reported 0, 50 and 100 of 100.").into()
}

fn png_block() -> ContentBlock {
    ContentBlock::Image(BinaryContent {
        data: STANDARD.encode(RED_PIXEL_PNG),
        mime_type: "image/png".into(),
        annotations: None,
        meta: None,
    })
}

fn text_resource(uri: &str, mime_type: &str, text: &str) -> ContentBlock {
    ContentBlock::Resource(EmbeddedResource {
        resource: ResourceContents {
            uri: uri.into(),
            mime_type: Some(mime_type.into()),
            text: Some(text.into()),
            blob: None,
            meta: None,
        },
        annotations: None,
        meta: None,
    })
}

/// A complete RIFF/WAVE file: PCM, mono, 16-bit, [`WAV_SAMPLE_RATE_HZ`], holding
/// [`WAV_SAMPLE_COUNT`] samples of silence. Built rather than embedded so that the
/// chunk sizes are visibly consistent with the data.
fn silent_wav() -> Vec<u8> {
    const CHANNELS: u16 = 1;
    const BITS_PER_SAMPLE: u16 = 16;
    let block_align = CHANNELS * BITS_PER_SAMPLE / 8;
    let byte_rate = WAV_SAMPLE_RATE_HZ * u32::from(block_align);
    let data_len = WAV_SAMPLE_COUNT * u32::from(block_align);
    let mut wav = Vec::new();
    wav.extend_from_slice(b"RIFF");
    // The RIFF size counts everything after this field: "WAVE", the 24-byte fmt
    // chunk and the 8-byte data chunk header, plus the samples.
    wav.extend_from_slice(&(4 + 24 + 8 + data_len).to_le_bytes());
    wav.extend_from_slice(b"WAVEfmt ");
    wav.extend_from_slice(&16u32.to_le_bytes());
    wav.extend_from_slice(&1u16.to_le_bytes()); // PCM
    wav.extend_from_slice(&CHANNELS.to_le_bytes());
    wav.extend_from_slice(&WAV_SAMPLE_RATE_HZ.to_le_bytes());
    wav.extend_from_slice(&byte_rate.to_le_bytes());
    wav.extend_from_slice(&block_align.to_le_bytes());
    wav.extend_from_slice(&BITS_PER_SAMPLE.to_le_bytes());
    wav.extend_from_slice(b"data");
    wav.extend_from_slice(&data_len.to_le_bytes());
    wav.resize(wav.len() + data_len as usize, 0);
    wav
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wav_sizes_match_its_contents() {
        let wav = silent_wav();
        let riff_size = u32::from_le_bytes([wav[4], wav[5], wav[6], wav[7]]);
        assert_eq!(riff_size as usize, wav.len() - 8);
        let data_size = u32::from_le_bytes([wav[40], wav[41], wav[42], wav[43]]);
        assert_eq!(data_size as usize, wav.len() - 44);
        assert_eq!(&wav[8..16], b"WAVEfmt ");
    }

    #[test]
    fn the_png_starts_with_the_png_signature() {
        assert_eq!(&RED_PIXEL_PNG[..8], b"\x89PNG\r\n\x1a\n");
        assert_eq!(
            &RED_PIXEL_PNG[RED_PIXEL_PNG.len() - 8..RED_PIXEL_PNG.len() - 4],
            b"IEND"
        );
    }
}
