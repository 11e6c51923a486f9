//! Words for search: text split on anything that is not a letter or digit and on
//! camelCase boundaries, lower-cased. `listOrderItems` gives `list`, `order`,
//! `items`; `/orders/{order_id}/items` gives `orders`, `order`, `id`, `items`;
//! `HTTPServer` gives `http`, `server`.

/// The words of `text`, in order, repeats included.
pub(crate) fn words(text: &str) -> Vec<String> {
    let characters: Vec<char> = text.chars().collect();
    let mut words = Vec::new();
    let mut current = String::new();
    for (position, &character) in characters.iter().enumerate() {
        if !character.is_alphanumeric() {
            flush(&mut current, &mut words);
            continue;
        }
        if !current.is_empty() && character.is_uppercase() {
            let previous = characters[position - 1];
            let next = characters.get(position + 1);
            // `orderItems`, `v2Items`, and the last capital of `HTTPServer`.
            let boundary = previous.is_lowercase()
                || previous.is_numeric()
                || (previous.is_uppercase() && next.is_some_and(|next| next.is_lowercase()));
            if boundary {
                flush(&mut current, &mut words);
            }
        }
        current.extend(character.to_lowercase());
    }
    flush(&mut current, &mut words);
    words
}

fn flush(current: &mut String, words: &mut Vec<String>) {
    if !current.is_empty() {
        words.push(std::mem::take(current));
    }
}
