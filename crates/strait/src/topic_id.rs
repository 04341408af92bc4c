//! A topic's id (KIP-516): a topic deleted and created again under the same name gets a new one,
//! so a saved position can be told apart from one of an earlier topic of that name.

/// A topic's id as librdkafka prints it: its 16 bytes in base64 without padding (22
/// characters; the standard alphabet, where `kafka-topics.sh --describe` prints the URL-safe one).
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct TopicId(pub String);

impl TopicId {
    /// Its 16 bytes, as the wire carries them (Metadata, Fetch v13+); `None` when it is not a
    /// base64 form of 16 bytes. Either alphabet: Kafka prints the URL-safe one, librdkafka
    /// (whose ids Strait saves) the standard one.
    pub fn uuid(&self) -> Option<strait_wire::Uuid> {
        use base64::Engine;
        let url_safe = self.0.replace('+', "-").replace('/', "_");
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(url_safe).ok()?;
        strait_wire::Uuid::from_slice(&bytes).ok()
    }
}

impl std::fmt::Display for TopicId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
