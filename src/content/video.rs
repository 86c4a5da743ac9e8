//! Video nodes: only YouTube and Vimeo, and only as an embed built from the video id parsed
//! out of the URL an editor gives; nothing from the form is ever put into the page as HTML.

/// The embed hosts; the Content-Security-Policy allows frames from exactly these.
pub(crate) const YOUTUBE_EMBED: &str = "https://www.youtube-nocookie.com";
pub(crate) const VIMEO_EMBED: &str = "https://player.vimeo.com";

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Video {
    YouTube(String),
    Vimeo(String),
}

impl Video {
    /// The video behind a YouTube or Vimeo page URL; `None` for anything else.
    pub(crate) fn parse(url: &str) -> Option<Video> {
        let url = url.trim();
        let rest = url
            .strip_prefix("https://")
            .or_else(|| url.strip_prefix("http://"))?;
        let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
        let host = host.to_ascii_lowercase();
        let host = host.strip_prefix("www.").unwrap_or(&host);
        let host = host.strip_prefix("m.").unwrap_or(host);
        let (path, query) = path.split_once('?').unwrap_or((path, ""));
        match host {
            "youtube.com" => {
                let id = if path == "watch" {
                    query
                        .split('&')
                        .find_map(|kv| kv.strip_prefix("v="))
                        .unwrap_or("")
                } else if let Some(id) = path.strip_prefix("embed/") {
                    id
                } else {
                    path.strip_prefix("shorts/").unwrap_or_default()
                };
                youtube_id(id).map(Video::YouTube)
            }
            "youtu.be" => youtube_id(path).map(Video::YouTube),
            "vimeo.com" => vimeo_id(path.trim_end_matches('/')).map(Video::Vimeo),
            "player.vimeo.com" => path
                .strip_prefix("video/")
                .and_then(vimeo_id)
                .map(Video::Vimeo),
            _ => None,
        }
    }

    pub(crate) fn provider(&self) -> &'static str {
        match self {
            Video::YouTube(_) => "youtube",
            Video::Vimeo(_) => "vimeo",
        }
    }

    pub(crate) fn provider_label(&self) -> &'static str {
        match self {
            Video::YouTube(_) => "YouTube",
            Video::Vimeo(_) => "Vimeo",
        }
    }

    /// The iframe address (built only from the checked id).
    pub(crate) fn embed_url(&self) -> String {
        match self {
            Video::YouTube(id) => format!("{YOUTUBE_EMBED}/embed/{id}"),
            Video::Vimeo(id) => format!("{VIMEO_EMBED}/video/{id}"),
        }
    }

    /// The video's own page, for a plain link.
    pub(crate) fn watch_url(&self) -> String {
        match self {
            Video::YouTube(id) => format!("https://www.youtube.com/watch?v={id}"),
            Video::Vimeo(id) => format!("https://vimeo.com/{id}"),
        }
    }
}

fn youtube_id(id: &str) -> Option<String> {
    (id.len() == 11
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'))
    .then(|| id.to_string())
}

fn vimeo_id(id: &str) -> Option<String> {
    (!id.is_empty() && id.len() <= 12 && id.bytes().all(|b| b.is_ascii_digit()))
        .then(|| id.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn youtube_and_vimeo_urls_give_their_ids() {
        let yt = Some(Video::YouTube("dQw4w9WgXcQ".into()));
        assert_eq!(
            Video::parse("https://www.youtube.com/watch?v=dQw4w9WgXcQ"),
            yt
        );
        assert_eq!(Video::parse("https://youtu.be/dQw4w9WgXcQ"), yt);
        assert_eq!(
            Video::parse("https://youtube.com/watch?feature=x&v=dQw4w9WgXcQ"),
            yt
        );
        assert_eq!(
            Video::parse("https://vimeo.com/76979871"),
            Some(Video::Vimeo("76979871".into()))
        );
    }

    #[test]
    fn anything_else_is_refused() {
        for url in [
            "https://evil.example.com/watch?v=dQw4w9WgXcQ",
            "https://www.youtube.com.evil.com/watch?v=dQw4w9WgXcQ",
            "https://www.youtube.com/watch?v=\"><script>",
            "javascript:alert(1)",
            "https://vimeo.com/abc",
            "<iframe src=https://evil>",
        ] {
            assert_eq!(Video::parse(url), None, "{url}");
        }
    }
}
