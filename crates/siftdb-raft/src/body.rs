//! The postcard bodies of the HTTP routes, shared by the client API
//! ([`crate::api`]) and the raft messages between nodes
//! ([`crate::network`]).
//!
//! Owns: [`decode_body`], [`encode_body`], [`bad_body`].
//! Must never: panic on a body it cannot decode (that is a 400) or on a
//! value it cannot encode (that is a 500).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// A postcard body.
pub(crate) fn decode_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, postcard::Error> {
    postcard::from_bytes(body)
}

/// The 400 answering a body that did not decode.
pub(crate) fn bad_body(e: postcard::Error) -> Response {
    (StatusCode::BAD_REQUEST, format!("undecodable body: {e}")).into_response()
}

/// `value` as a postcard body, or a 500.
pub(crate) fn encode_body<T: Serialize>(value: &T) -> Response {
    match postcard::to_allocvec(value) {
        Ok(bytes) => bytes.into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("unencodable reply: {e}"),
        )
            .into_response(),
    }
}
