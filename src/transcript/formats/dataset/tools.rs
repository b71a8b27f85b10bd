//! The tools a line declares, in any shape (`tools`, legacy `functions`), read once per
//! thread and remembered by their bytes.

use super::Tool;
use crate::transcript::scan::{self, Kind, Remembered, Scanner};
use smallvec::SmallVec;
use std::borrow::Cow;
use std::cell::RefCell;
use std::rc::Rc;

/// The tools a line declares. Each is shared with the lines that declare it with the same bytes.
pub type Tools = Vec<Rc<Tool<'static>>>;

/// How many tool declarations each thread remembers.
const KNOWN_TOOLS: usize = 16;

/// Tool declarations read before on this thread, by their bytes: the lines of a dataset
/// repeat the same few declarations (in one list or in varying subsets), and a declaration
/// seen before is compared, not read again (see [`Scanner::skip_repeat`]). At most
/// [`KNOWN_TOOLS`], replaced in turn: memory stays flat.
#[derive(Default)]
struct KnownTools {
    known: Vec<(Remembered, Option<Rc<Tool<'static>>>)>,
    next: usize,
}

thread_local! {
    static KNOWN: RefCell<KnownTools> = RefCell::default();
}

/// `tools` (or legacy `functions`): OpenAI `{"type": "function", "function": {"name",
/// "parameters"}}`, Responses and legacy `{"name", "parameters"}`, Anthropic `{"name",
/// "input_schema"}`; ShareGPT may hold the list as a JSON string. Lists add up.
pub(super) fn read_tools(s: &mut Scanner<'_>, tools: &mut Option<Tools>) -> scan::Result<()> {
    let list = if s.peek() == Some(Kind::String) { tools_of_string(&s.string()?.decode()) } else { tools_array(s)? };
    match (tools.as_mut(), list) {
        (Some(tools), Some(list)) => tools.extend(list),
        (None, list) => *tools = list,
        (_, None) => {}
    }
    Ok(())
}

/// Gemini `tools`: `[{"functionDeclarations": [{"name", "parameters"}]}, {"googleSearch": {}},
/// ...]` (or `function_declarations`). Only function declarations declare what calls may name:
/// a line whose tools declare none is read as declaring no tools.
pub(super) fn read_gemini_tools(s: &mut Scanner<'_>, tools: &mut Option<Tools>) -> scan::Result<()> {
    s.opt_array(|s| {
        s.opt_object(|s, k| match &*k.key() {
            b"functionDeclarations" | b"function_declarations" => read_tools(s, tools),
            _ => s.skip(),
        })?;
        Ok(())
    })?;
    Ok(())
}

/// A list of tools given as JSON text (ShareGPT); `None` when it is not JSON.
fn tools_of_string(text: &str) -> Option<Tools> {
    let v = serde_json::from_str::<serde_json::Value>(text).ok()?;
    let mut list = Vec::new();
    for t in v.as_array().into_iter().flatten() {
        let f = t.get("function").unwrap_or(t);
        let Some(name) = f.get("name").and_then(|n| n.as_str()) else { continue };
        let schema = f.get("parameters").or_else(|| f.get("input_schema"));
        let required = schema.and_then(|p| p.get("required")).and_then(|r| r.as_array());
        let required = required.into_iter().flatten().filter_map(|r| r.as_str()).map(|r| Cow::Owned(r.to_owned())).collect();
        list.push(Rc::new(Tool::new(Cow::Owned(name.to_owned()), required)));
    }
    Some(list)
}

/// A `tools` array; `None` when the value is not one.
fn tools_array(s: &mut Scanner<'_>) -> scan::Result<Option<Tools>> {
    KNOWN.with_borrow_mut(|k| {
        let mut list = Vec::new();
        let is_array = s.opt_array(|s| {
            if let Some((_, tool)) = k.known.iter().find(|(seen, _)| s.skip_repeat(seen)) {
                list.extend(tool.clone());
                return Ok(());
            }
            let at = k.next;
            k.next = (k.next + 1) % KNOWN_TOOLS;
            if at == k.known.len() {
                k.known.push(Default::default());
            }
            let slot = &mut k.known[at];
            // (A declaration that cannot be read fails the line; the slot then still holds
            // what it held.)
            let tool = s.remember(&mut slot.0, read_tool)?.map(Rc::new);
            slot.1 = tool.clone();
            list.extend(tool);
            Ok(())
        })?;
        Ok(is_array.then_some(list))
    })
}

/// One declaration of a `tools` array; `None` without a name.
fn read_tool(s: &mut Scanner<'_>) -> scan::Result<Option<Tool<'static>>> {
    let (mut name, mut required) = (None, SmallVec::new());
    s.opt_object(|s, k| {
        match &*k.key() {
            b"name" => name = s.opt_string()?,
            b"parameters" | b"input_schema" | b"parametersJsonSchema" | b"parameters_json_schema" => read_required(s, &mut required)?,
            b"function" => {
                s.opt_object(|s, k| {
                    match &*k.key() {
                        b"name" => name = s.opt_string()?,
                        b"parameters" => read_required(s, &mut required)?,
                        _ => s.skip()?,
                    }
                    Ok(())
                })?;
            }
            _ => s.skip()?,
        }
        Ok(())
    })?;
    let required = required.into_iter().map(|r: Cow<'_, str>| Cow::Owned(r.into_owned())).collect();
    Ok(name.map(|name| Tool::new(Cow::Owned(name.decode().into_owned()), required)))
}

fn read_required<'a>(s: &mut Scanner<'a>, required: &mut SmallVec<[Cow<'a, str>; 4]>) -> scan::Result<()> {
    s.opt_object(|s, k| {
        if &*k.key() == b"required" {
            s.opt_array(|s| {
                if let Some(r) = s.opt_string()? {
                    required.push(r.decode());
                }
                Ok(())
            })?;
        } else {
            s.skip()?;
        }
        Ok(())
    })?;
    Ok(())
}
