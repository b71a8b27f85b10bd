//! Error messages for people: shared by the command line and the daemon.

/// An error and its causes on one line, `outer: inner: ...`, each said once: a cause whose text
/// the message already holds (an error that prints its source, such as `path: No such file or
/// directory (os error 2)`) is not repeated.
pub fn chain(e: &anyhow::Error) -> String {
    let mut message = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if message.contains(&text) {
            continue;
        }
        if !message.is_empty() {
            message.push_str(": ");
        }
        message.push_str(&text);
    }
    message
}
